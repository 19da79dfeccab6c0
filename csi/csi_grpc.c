/* csi_grpc.c - unary gRPC methods on a unix socket, on gRPC's C core. */
#include "config.h"

#include "csi_grpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

/* One call, from request_call to the end of its reply.  Its address is the
 * completion queue tag of each step. */
enum call_state {
	ST_ACCEPT, /* waiting for a call */
	ST_READ,   /* reading its request */
	ST_REPLY,  /* the reply is being sent */
};

struct call {
	enum call_state state;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *req;
	grpc_byte_buffer *resp;
	grpc_slice status;
	int cancelled;
	const struct csi_method *m;
	uint8_t *bytes;
	size_t len;
	struct call *next; /* in the worker's queue */
};

struct csi_server {
	const struct tfs_log *log;
	const struct csi_method *methods;
	size_t n_methods;
	void *ctx;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	grpc_server *srv;
	grpc_completion_queue *cq;
	atomic_bool stopping;
	int shutdown_tag; /* its address is the tag of the server's shutdown */

	pthread_t worker;
	bool worker_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct call *head, *tail; /* queued for the worker; under lock */
	bool worker_exit;         /* under lock */
};

/* ---- the socket file ---- */

/* Does a server answer on `path`? */
static bool answers(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool yes;

	if (fd < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	yes = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return yes;
}

static int clear_socket_path(const struct tfs_log *log, const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : errno;
	if (!S_ISSOCK(st.st_mode)) {
		tfs_err(log, "%s exists and is not a socket", path);
		return EEXIST;
	}
	if (answers(path)) {
		tfs_err(log, "%s: another server answers there", path);
		return EADDRINUSE;
	}
	if (unlink(path) != 0 && errno != ENOENT)
		return errno;
	tfs_info(log, "%s: replaced a stale socket", path);
	return 0;
}

/* ---- calls ---- */

static void call_free(struct call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->req)
		grpc_byte_buffer_destroy(c->req);
	if (c->resp)
		grpc_byte_buffer_destroy(c->resp);
	grpc_slice_unref(c->status);
	/* A request may hold a Secret's values (gRPC's own buffers of it are
	 * beyond reach; this copy is not). */
	if (c->bytes)
		explicit_bzero(c->bytes, c->len);
	free(c->bytes);
	free(c);
}

/* Ask for the next call.  Returns 0 or ENOMEM/EIO. */
static int accept_next(struct csi_server *s)
{
	struct call *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return ENOMEM;
	c->state = ST_ACCEPT;
	c->status = grpc_empty_slice();
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	if (grpc_server_request_call(s->srv, &c->call, &c->details, &c->md, s->cq, s->cq, c) !=
	    GRPC_CALL_OK) {
		call_free(c);
		return EIO;
	}
	return 0;
}

static bool slice_is(grpc_slice sl, const char *s)
{
	size_t n = strlen(s);

	return GRPC_SLICE_LENGTH(sl) == n && memcmp(GRPC_SLICE_START_PTR(sl), s, n) == 0;
}

/* Send the reply: the message when `r` is OK, and the status. */
static void send_reply(struct csi_server *s, struct call *c, struct csi_reply *r)
{
	grpc_op ops[4];
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (r->code == CSI_OK) {
		grpc_slice sl = grpc_slice_from_copied_buffer((const char *)r->data, r->len);

		c->resp = grpc_raw_byte_buffer_create(&sl, 1);
		grpc_slice_unref(sl);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->resp;
	}
	grpc_slice_unref(c->status);
	c->status = grpc_slice_from_copied_string(r->code == CSI_OK ? "" : r->msg);
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)r->code;
	ops[n++].data.send_status_from_server.status_details = &c->status;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
	free(r->data);
	r->data = NULL;
	c->state = ST_REPLY;
	if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK) {
		tfs_err(s->log, "gRPC: cannot send a reply");
		call_free(c);
	}
}

static void run_handler(struct csi_server *s, struct call *c)
{
	struct csi_reply r = { .code = CSI_OK };

	c->m->fn(s->ctx, c->bytes, c->len, &r);
	if (r.code != CSI_OK && r.msg[0] == '\0')
		snprintf(r.msg, sizeof(r.msg), "failed");
	send_reply(s, c, &r);
}

static void reply_code(struct csi_server *s, struct call *c, enum csi_code code, const char *msg)
{
	struct csi_reply r = { .code = code };

	snprintf(r.msg, sizeof(r.msg), "%s", msg);
	send_reply(s, c, &r);
}

/* The request has arrived: find its method and run it or queue it. */
static void dispatch(struct csi_server *s, struct call *c)
{
	if (c->req) {
		grpc_byte_buffer_reader rd;
		grpc_slice all;

		if (!grpc_byte_buffer_reader_init(&rd, c->req)) {
			reply_code(s, c, CSI_INTERNAL, "cannot read the request");
			return;
		}
		all = grpc_byte_buffer_reader_readall(&rd);
		grpc_byte_buffer_reader_destroy(&rd);
		c->len = GRPC_SLICE_LENGTH(all);
		c->bytes = malloc(c->len ? c->len : 1);
		if (c->bytes)
			memcpy(c->bytes, GRPC_SLICE_START_PTR(all), c->len);
		grpc_slice_unref(all);
		if (c->bytes == NULL) {
			reply_code(s, c, CSI_INTERNAL, "out of memory");
			return;
		}
	}
	for (size_t i = 0; i < s->n_methods; i++) {
		if (slice_is(c->details.method, s->methods[i].path)) {
			c->m = &s->methods[i];
			break;
		}
	}
	if (c->m == NULL) {
		char *m = grpc_slice_to_c_string(c->details.method);
		char msg[512];

		snprintf(msg, sizeof(msg), "unknown method %.400s", m ? m : "?");
		gpr_free(m);
		tfs_info(s->log, "gRPC: %s", msg);
		reply_code(s, c, CSI_UNIMPLEMENTED, msg);
		return;
	}
	if (c->req == NULL) {
		reply_code(s, c, CSI_INVALID_ARGUMENT, "the call has no request message");
		return;
	}
	if (c->m->inline_call) {
		run_handler(s, c);
		return;
	}
	pthread_mutex_lock(&s->lock);
	c->next = NULL;
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *worker_main(void *arg)
{
	struct csi_server *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		while (s->head == NULL && !s->worker_exit)
			pthread_cond_wait(&s->cond, &s->lock);
		struct call *c = s->head;
		if (c) {
			s->head = c->next;
			if (s->head == NULL)
				s->tail = NULL;
		}
		bool exit_now = c == NULL;
		pthread_mutex_unlock(&s->lock);
		if (exit_now) {
			grpc_server_cancel_all_calls(s->srv);
			return NULL;
		}
		if (atomic_load(&s->stopping))
			reply_code(s, c, CSI_UNAVAILABLE, "the plugin is stopping");
		else
			run_handler(s, c);
	}
}

/* One completion of the queue. */
static void on_event(struct csi_server *s, grpc_event ev)
{
	struct call *c = ev.tag;

	if (ev.tag == &s->shutdown_tag)
		return;
	switch (c->state) {
	case ST_ACCEPT:
		if (!ev.success) { /* the server is shutting down */
			call_free(c);
			return;
		}
		if (!atomic_load(&s->stopping) && accept_next(s) != 0)
			tfs_err(s->log, "gRPC: cannot wait for the next call");
		grpc_op op;
		memset(&op, 0, sizeof(op));
		op.op = GRPC_OP_RECV_MESSAGE;
		op.data.recv_message.recv_message = &c->req;
		c->state = ST_READ;
		if (grpc_call_start_batch(c->call, &op, 1, c, NULL) != GRPC_CALL_OK)
			call_free(c);
		return;
	case ST_READ:
		if (!ev.success) {
			call_free(c);
			return;
		}
		dispatch(s, c);
		return;
	case ST_REPLY:
		call_free(c);
		return;
	}
}

/* ---- the server ---- */

int csi_server_start(const char *path, const struct csi_method *methods, size_t n, void *ctx,
		     const struct tfs_log *log, struct csi_server **out)
{
	struct csi_server *s;
	char addr[sizeof(s->path) + 8];
	grpc_arg args[2];
	int rc;

	*out = NULL;
	if (path[0] != '/' || strlen(path) >= sizeof(s->path))
		return ENAMETOOLONG;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return ENOMEM;
	s->log = log;
	s->methods = methods;
	s->n_methods = n;
	s->ctx = ctx;
	snprintf(s->path, sizeof(s->path), "%s", path);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	rc = clear_socket_path(log, path);
	if (rc) {
		free(s);
		return rc;
	}
	grpc_init();
	memset(args, 0, sizeof(args));
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = CSI_GRPC_MAX_REQUEST;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = GRPC_ARG_MAX_METADATA_SIZE;
	args[1].value.integer = 16 * 1024;
	grpc_channel_args ca = { .num_args = 2, .args = args };
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->srv = grpc_server_create(&ca, NULL);
	grpc_server_register_completion_queue(s->srv, s->cq, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
	/* The socket is made with the process's umask: only root may call. */
	mode_t old = umask(0177);
	int port = grpc_server_add_http2_port(s->srv, addr, cr);
	umask(old);
	grpc_server_credentials_release(cr);
	if (port == 0) {
		tfs_err(log, "gRPC cannot listen on %s", path);
		rc = EIO;
		goto fail;
	}
	grpc_server_start(s->srv);
	if (chmod(path, 0600) != 0) {
		rc = errno;
		tfs_err(log, "chmod %s: %s", path, strerror(rc));
		goto fail;
	}
	rc = accept_next(s);
	if (rc == 0)
		rc = pthread_create(&s->worker, NULL, worker_main, s);
	if (rc)
		goto fail;
	s->worker_started = true;
	*out = s;
	return 0;
fail:
	csi_server_free(s);
	return rc;
}

void csi_server_stop(struct csi_server *s)
{
	bool was = atomic_exchange(&s->stopping, true);

	if (was)
		return;
	grpc_server_shutdown_and_notify(s->srv, s->cq, &s->shutdown_tag);
	if (!s->worker_started) {
		grpc_server_cancel_all_calls(s->srv);
		return;
	}
	/* The worker finishes the operation in progress, answers the queued
	 * ones, then cancels what is left (gRPC would otherwise wait for
	 * idle client connections before it reports the shutdown). */
	pthread_mutex_lock(&s->lock);
	s->worker_exit = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int csi_server_run(struct csi_server *s)
{
	gpr_timespec forever = gpr_inf_future(GPR_CLOCK_REALTIME);

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(s->cq, forever, NULL);

		if (ev.type != GRPC_OP_COMPLETE)
			break;
		on_event(s, ev);
		if (ev.tag == &s->shutdown_tag)
			break;
	}
	return 0;
}

void csi_server_free(struct csi_server *s)
{
	if (s == NULL)
		return;
	if (s->srv && !atomic_load(&s->stopping))
		csi_server_stop(s);
	if (s->worker_started)
		pthread_join(s->worker, NULL);
	if (s->srv) {
		grpc_server_cancel_all_calls(s->srv);
		grpc_completion_queue_shutdown(s->cq);
		for (;;) {
			grpc_event ev = grpc_completion_queue_next(
				s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

			if (ev.type == GRPC_QUEUE_SHUTDOWN)
				break;
			if (ev.type == GRPC_OP_COMPLETE && ev.tag != &s->shutdown_tag)
				call_free(ev.tag);
		}
		grpc_server_destroy(s->srv);
		grpc_completion_queue_destroy(s->cq);
		grpc_shutdown();
		(void)unlink(s->path);
	}
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}
