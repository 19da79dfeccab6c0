/* mini_http.c - a scripted HTTP/1.1 server on 127.0.0.1 for unit tests. */
#include "config.h"

#include "mini_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SCRIPT 64

struct mini_http {
	int lfd;
	pthread_t tid;
	pthread_mutex_t lock;
	struct mini_resp script[MAX_SCRIPT];
	int n_script, next;
	char *requests[MAX_SCRIPT];
	int n_requests;
	int n_conns;
	atomic_int stop; /* set by mini_http_stop(), read by the server thread */
};

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Read one request head (and discard its body); returns 0 on success. */
static int read_request(int fd, char *head, size_t cap)
{
	size_t len = 0;
	while (len + 1 < cap) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 5000) <= 0)
			return -1;
		ssize_t n = recv(fd, head + len, 1, 0);
		if (n <= 0)
			return -1;
		len++;
		head[len] = '\0';
		if (len >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0)
			break;
	}
	const char *cl = strcasestr(head, "\r\ncontent-length:");
	long body = cl ? strtol(cl + 17, NULL, 10) : 0;
	char sink[4096];
	while (body > 0) {
		ssize_t n =
			recv(fd, sink, body < (long)sizeof(sink) ? (size_t)body : sizeof(sink), 0);
		if (n <= 0)
			return -1;
		body -= n;
	}
	return 0;
}

static void *serve(void *arg)
{
	struct mini_http *s = arg;
	while (!s->stop) {
		struct pollfd pfd = { .fd = s->lfd, .events = POLLIN };
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&s->lock);
		s->n_conns++;
		pthread_mutex_unlock(&s->lock);
		char head[16384];
		while (!s->stop && read_request(fd, head, sizeof(head)) == 0) {
			pthread_mutex_lock(&s->lock);
			struct mini_resp r = { 500, "", "<Error><Code>NoScript</Code></Error>",
					       -1,  -1, NULL };
			if (s->next < s->n_script)
				r = s->script[s->next++];
			if (s->n_requests < MAX_SCRIPT)
				s->requests[s->n_requests++] = strdup(head);
			pthread_mutex_unlock(&s->lock);

			const char *body = r.body ? r.body : "";
			long blen = (long)strlen(body);
			long cl = r.content_length >= 0 ? r.content_length : blen;
			char hdr[2048], cls[32];
			snprintf(cls, sizeof(cls), "%ld", cl);
			int hn = snprintf(hdr, sizeof(hdr),
					  "HTTP/1.1 %d X\r\nContent-Length: %s\r\n%s\r\n", r.status,
					  r.content_length_text ? r.content_length_text : cls,
					  r.headers ? r.headers : "");
			send_all(fd, hdr, (size_t)hn);
			if (strncmp(head, "HEAD ", 5) == 0)
				continue;
			if (r.truncate_after >= 0) {
				send_all(fd, body, (size_t)r.truncate_after);
				break; /* close mid-body */
			}
			send_all(fd, body, (size_t)blen);
		}
		close(fd);
	}
	return NULL;
}

struct mini_http *mini_http_start(int *port)
{
	struct mini_http *s = calloc(1, sizeof(*s));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(s->lfd, 16) < 0 || getsockname(s->lfd, (struct sockaddr *)&a, &alen) < 0) {
		free(s);
		return NULL;
	}
	*port = ntohs(a.sin_port);
	pthread_mutex_init(&s->lock, NULL);
	pthread_create(&s->tid, NULL, serve, s);
	return s;
}

void mini_http_push(struct mini_http *s, struct mini_resp r)
{
	pthread_mutex_lock(&s->lock);
	if (s->n_script < MAX_SCRIPT)
		s->script[s->n_script++] = r;
	pthread_mutex_unlock(&s->lock);
}

int mini_http_count(struct mini_http *s)
{
	pthread_mutex_lock(&s->lock);
	int n = s->n_requests;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int mini_http_connections(struct mini_http *s)
{
	pthread_mutex_lock(&s->lock);
	int n = s->n_conns;
	pthread_mutex_unlock(&s->lock);
	return n;
}

const char *mini_http_request(struct mini_http *s, int i)
{
	pthread_mutex_lock(&s->lock);
	const char *r = i < s->n_requests ? s->requests[i] : NULL;
	pthread_mutex_unlock(&s->lock);
	return r;
}

void mini_http_stop(struct mini_http *s)
{
	s->stop = 1;
	pthread_join(s->tid, NULL);
	close(s->lfd);
	for (int i = 0; i < s->n_requests; i++)
		free(s->requests[i]);
	free(s);
}
