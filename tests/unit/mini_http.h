/* mini_http.h - a scripted HTTP/1.1 server on 127.0.0.1 for unit tests.
 *
 * Each request is answered with the next scripted response; the request
 * line and headers are recorded so tests can check what the client sent.
 * One thread serves one connection at a time (keep-alive supported).
 */
#ifndef TFS_MINI_HTTP_H
#define TFS_MINI_HTTP_H

#include <stddef.h>

struct mini_resp {
	int status;
	const char *headers; /* extra header lines, each ending in "\r\n" */
	const char *body;
	long content_length;             /* -1: strlen(body) */
	int truncate_after;              /* >= 0: send only this many body bytes, then close */
	const char *content_length_text; /* non-NULL: the Content-Length value, verbatim */
};

struct mini_http;

/* Start a server; *port receives the port.  Returns NULL on failure. */
struct mini_http *mini_http_start(int *port);
/* Queue a response (copied by reference: strings must outlive the server). */
void mini_http_push(struct mini_http *s, struct mini_resp r);
/* Number of requests served so far. */
int mini_http_count(struct mini_http *s);
/* Number of TCP connections accepted so far. */
int mini_http_connections(struct mini_http *s);
/* Request i's request line plus headers (raw text), or NULL. */
const char *mini_http_request(struct mini_http *s, int i);
void mini_http_stop(struct mini_http *s);

#endif
