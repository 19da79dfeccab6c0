/*
 * s3_put.c — PUT many small objects into an S3 bucket, many in flight, for
 * bench/scale.sh's populate step.  Python (boto3) spends more CPU per PUT
 * than the loopback server does; this tool keeps the server the limit.
 *
 *   s3_put ENDPOINT BUCKET REGION SIZE CONCURRENCY < KEYS
 *
 * KEYS: one object key per line (plain characters only: [A-Za-z0-9/._-]).
 * Each object holds SIZE bytes: its key repeated, then newlines.
 * Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.  Requests are
 * SigV4-signed by libcurl, with the SHA-256 of each body.  A failed PUT is retried 3
 * times; exit status 1 if any PUT failed for good.  Progress on stderr
 * every 10 s.
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONC 512
#define KEY_MAX 512

struct req {
	CURL *h;
	struct curl_slist *hdrs;
	char key[KEY_MAX];
	int tries;
};

struct ctx {
	const char *ep, *bucket, *sigv4, *userpwd;
	char *body;
	size_t size;
	unsigned long done, failed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
	(void)p;
	(void)u;
	return s * n;
}

static int next_key(char *key)
{
	size_t n;

	while (fgets(key, KEY_MAX, stdin)) {
		n = strcspn(key, "\r\n");
		key[n] = '\0';
		if (n > 0)
			return 1;
	}
	return 0;
}

static void fill_body(struct ctx *c, const char *key)
{
	size_t kl = strlen(key), i;

	for (i = 0; i + 1 < c->size; i++)
		c->body[i] = (i % (kl + 1) == kl) ? '\n' : key[i % (kl + 1)];
	if (c->size)
		c->body[c->size - 1] = '\n';
}

static void start(CURLM *m, struct ctx *c, struct req *r)
{
	char url[1024];

	snprintf(url, sizeof(url), "%s/%s/%s", c->ep, c->bucket, r->key);
	unsigned char md[SHA256_DIGEST_LENGTH];
	char hdr[128];
	int i, n;

	fill_body(c, r->key);
	SHA256((unsigned char *)c->body, c->size, md);
	n = snprintf(hdr, sizeof(hdr), "x-amz-content-sha256: ");
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++)
		n += snprintf(hdr + n, sizeof(hdr) - n, "%02x", md[i]);
	curl_slist_free_all(r->hdrs);
	r->hdrs = curl_slist_append(NULL, hdr);
	r->hdrs = curl_slist_append(r->hdrs, "Content-Type: application/octet-stream");
	curl_easy_reset(r->h);
	curl_easy_setopt(r->h, CURLOPT_URL, url);
	curl_easy_setopt(r->h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(r->h, CURLOPT_POSTFIELDSIZE, (long)c->size);
	curl_easy_setopt(r->h, CURLOPT_COPYPOSTFIELDS, c->body);
	curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(r->h, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(r->h, CURLOPT_USERPWD, c->userpwd);
	curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(r->h, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->h, CURLOPT_TIMEOUT, 120L);
	curl_multi_add_handle(m, r->h);
}

int main(int argc, char **argv)
{
	static struct req reqs[MAX_CONC];
	struct ctx c = { 0 };
	char sigv4[128], userpwd[512];
	const char *ak = getenv("AWS_ACCESS_KEY_ID");
	const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
	unsigned long conc, i, active = 0;
	double t0 = now(), tlast = t0;
	CURLMsg *msg;
	CURLM *m;
	int left;

	if (argc != 6 || !ak || !sk) {
		fprintf(stderr, "usage: s3_put ENDPOINT BUCKET REGION SIZE CONCURRENCY < KEYS\n"
				"(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set)\n");
		return 2;
	}
	c.ep = argv[1];
	c.bucket = argv[2];
	c.size = strtoul(argv[4], NULL, 10);
	conc = strtoul(argv[5], NULL, 10);
	if (conc < 1 || conc > MAX_CONC || c.size > (1u << 24)) {
		fprintf(stderr, "s3_put: CONCURRENCY 1..%d, SIZE <= 16 MiB\n", MAX_CONC);
		return 2;
	}
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", argv[3]);
	snprintf(userpwd, sizeof(userpwd), "%s:%s", ak, sk);
	c.sigv4 = sigv4;
	c.userpwd = userpwd;
	c.body = malloc(c.size + 1);
	if (!c.body)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)conc);
	for (i = 0; i < conc; i++) {
		reqs[i].h = curl_easy_init();
		if (!next_key(reqs[i].key))
			break;
		reqs[i].tries = 0;
		start(m, &c, &reqs[i]);
		active++;
	}
	while (active > 0) {
		int running;

		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left))) {
			struct req *r;
			long code = 0;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
			curl_multi_remove_handle(m, r->h);
			if (msg->data.result != CURLE_OK || code != 200) {
				if (++r->tries <= 3) {
					start(m, &c, r);
					continue;
				}
				if (c.failed < 10)
					fprintf(stderr, "s3_put: %s failed (curl %d, HTTP %ld)\n",
					r->key, msg->data.result, code);
				c.failed++;
			} else {
				c.done++;
			}
			if (next_key(r->key)) {
				r->tries = 0;
				start(m, &c, r);
			} else {
				active--;
			}
		}
		if (now() - tlast >= 10) {
			tlast = now();
			fprintf(stderr, "s3_put: %lu done, %lu failed, %.0f/s\n", c.done,
				c.failed, c.done / (tlast - t0));
		}
		curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	fprintf(stderr, "s3_put: %lu objects in %.1f s (%.0f/s), %lu failed\n", c.done,
		now() - t0, c.done / (now() - t0), c.failed);
	for (i = 0; i < conc; i++)
		if (reqs[i].h) {
			curl_easy_cleanup(reqs[i].h);
			curl_slist_free_all(reqs[i].hdrs);
		}
	curl_multi_cleanup(m);
	free(c.body);
	return c.failed ? 1 : 0;
}
