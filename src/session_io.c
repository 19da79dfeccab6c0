/* session_io.c - FUSE custom I/O hooks that record and replay FUSE_INIT
 * (see session_io.h). */
#include "config.h"

#include "session_io.h"

#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fdio.h"

/* The kernel orders every reply written to the FUSE device before the
 * requests read after it: a RELEASE comes only once each request on its
 * handle has been answered, so the handle is freed after their last use.
 * ThreadSanitizer sees that through the device's fd only when it saw the
 * fd opened, and this device came from the keeper: a release before each
 * write and an acquire after each read tell it (a TSan build only). */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define DEVICE_WRITTEN(io) __tsan_release(io)
#define DEVICE_READ(io) __tsan_acquire(io)
#else
#define DEVICE_WRITTEN(io) ((void)(io))
#define DEVICE_READ(io) ((void)(io))
#endif

#define REC_MAGIC "TFSSESS1"
#define REC_REQ_OFF 64
#define REC_REPLY_OFF (REC_REQ_OFF + TFS_SESSION_MAX_MSG)

struct rec_header {
	char magic[8];
	uint32_t req_len;
	uint32_t reply_len;
};

int tfs_session_io_open(struct tfs_session_io *io, int fuse_fd, int rec_fd, bool no_resend,
			const struct tfs_log *log)
{
	struct rec_header h;
	ssize_t n;

	memset(io, 0, sizeof(*io));
	io->fuse_fd = fuse_fd;
	io->rec_fd = rec_fd;
	io->no_resend = no_resend;
	io->log = log;
	n = tfs_pread_full(rec_fd, &h, sizeof(h), 0);
	if (n == 0)
		return 0; /* empty: the first daemon */
	if (n != (ssize_t)sizeof(h) || memcmp(h.magic, REC_MAGIC, sizeof(h.magic)) != 0 ||
	    h.req_len > TFS_SESSION_MAX_MSG || h.reply_len > TFS_SESSION_MAX_MSG ||
	    (h.req_len != 0 && h.req_len < sizeof(struct fuse_in_header) + sizeof(uint32_t) * 2) ||
	    (h.reply_len != 0 && h.reply_len < sizeof(struct fuse_out_header))) {
		tfs_err(log, "the FUSE session record is malformed");
		return EIO;
	}
	if (h.req_len == 0)
		return 0;
	if (tfs_pread_full(rec_fd, io->req, h.req_len, REC_REQ_OFF) != (ssize_t)h.req_len ||
	    (h.reply_len && tfs_pread_full(rec_fd, io->reply, h.reply_len, REC_REPLY_OFF) !=
				    (ssize_t)h.reply_len)) {
		tfs_err(log, "cannot read the FUSE session record: %s", strerror(errno));
		return EIO;
	}
	const struct fuse_in_header *in = (const void *)io->req;
	if (in->opcode != FUSE_INIT || in->len != h.req_len) {
		tfs_err(log, "the FUSE session record does not hold a FUSE_INIT");
		return EIO;
	}
	io->req_len = h.req_len;
	io->reply_len = h.reply_len;
	io->init_unique = in->unique;
	io->replay = true;
	atomic_store(&io->recorded, true);
	return 0;
}

bool tfs_session_io_resumed(const struct tfs_session_io *io)
{
	return io->req_len != 0 && io->reply_len != 0;
}

/* The kernel's protocol minor in the recorded (or just read) INIT. */
static uint32_t req_minor(const unsigned char *req)
{
	const struct fuse_init_in *arg = (const void *)(req + sizeof(struct fuse_in_header));
	return arg->minor;
}

static int write_header(int fd, size_t req_len, size_t reply_len)
{
	struct rec_header h = { .req_len = (uint32_t)req_len, .reply_len = (uint32_t)reply_len };
	memcpy(h.magic, REC_MAGIC, sizeof(h.magic));
	return tfs_pwrite_all(fd, &h, sizeof(h), 0);
}

/* First daemon: keep the INIT request just read (its reply comes later). */
static void record_request(struct tfs_session_io *io, const void *buf, size_t len)
{
	if (len > TFS_SESSION_MAX_MSG) {
		tfs_err(io->log,
			"FUSE_INIT of %zu bytes not recorded: a restarted daemon "
			"cannot resume this mount",
			len);
		return;
	}
	memcpy(io->req, buf, len);
	io->req_len = len;
	io->init_unique = ((const struct fuse_in_header *)buf)->unique;
	if (tfs_pwrite_all(io->rec_fd, buf, len, REC_REQ_OFF) != 0 ||
	    write_header(io->rec_fd, len, 0) != 0)
		tfs_err(io->log, "cannot record FUSE_INIT: %s", strerror(errno));
}

/* Keep the INIT reply and seal the record. */
static void record_reply(struct tfs_session_io *io, const void *buf, size_t len)
{
	if (len > TFS_SESSION_MAX_MSG || tfs_pwrite_all(io->rec_fd, buf, len, REC_REPLY_OFF) != 0 ||
	    write_header(io->rec_fd, io->req_len, len) != 0) {
		tfs_err(io->log, "cannot record the FUSE_INIT reply: a restarted daemon cannot "
				 "resume this mount");
		return;
	}
	if (fcntl(io->rec_fd, F_ADD_SEALS,
		  F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
		tfs_warn(io->log, "cannot seal the FUSE session record: %s", strerror(errno));
}

/* Log which negotiated values differ between two INIT replies. */
static void log_mismatch(const struct tfs_session_io *io, const unsigned char *now, size_t len)
{
	struct fuse_init_out a = { 0 }, b = { 0 };
	size_t hl = sizeof(struct fuse_out_header);
	memcpy(&a, io->reply + hl, io->reply_len - hl < sizeof(a) ? io->reply_len - hl : sizeof(a));
	memcpy(&b, now + hl, len - hl < sizeof(b) ? len - hl : sizeof(b));
	tfs_err(io->log,
		"resume refused: this daemon negotiates other FUSE parameters than the kernel "
		"agreed to (saved/now: major %u/%u minor %u/%u flags %#x/%#x flags2 %#x/%#x "
		"max_write %u/%u max_readahead %u/%u time_gran %u/%u max_pages %u/%u "
		"max_background %u/%u congestion_threshold %u/%u, length %zu/%zu)",
		a.major, b.major, a.minor, b.minor, a.flags, b.flags, a.flags2, b.flags2,
		a.max_write, b.max_write, a.max_readahead, b.max_readahead, a.time_gran,
		b.time_gran, a.max_pages, b.max_pages, a.max_background, b.max_background,
		a.congestion_threshold, b.congestion_threshold, io->reply_len, len);
}

/* The INIT is answered: let the other readers read, and ask the kernel to
 * resend what a dead daemon had read. */
static void init_answered(struct tfs_session_io *io, bool resumed)
{
	if (resumed && !io->no_resend && req_minor(io->req) >= TFS_FUSE_RESEND_MINOR) {
		struct fuse_out_header oh = {
			.len = sizeof(oh),
			.error = TFS_FUSE_NOTIFY_RESEND,
			.unique = 0,
		};
		if (write(io->fuse_fd, &oh, sizeof(oh)) == (ssize_t)sizeof(oh))
			atomic_store(&io->resent, true);
		else
			tfs_warn(io->log,
				 "FUSE_NOTIFY_RESEND failed (%s): requests the last "
				 "daemon had read stay unanswered",
				 strerror(errno));
	}
	atomic_store(&io->serving_ns, tfs_mono_ns());
	atomic_store(&io->init_done, true);
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct tfs_session_io *io = userdata ? tfs_fs_io(userdata) : NULL;
	size_t total = 0;
	if (io)
		DEVICE_WRITTEN(io);
	for (int i = 0; i < count; i++)
		total += iov[i].iov_len;
	if (io == NULL || atomic_load(&io->init_done) || io->req_len == 0 ||
	    iov[0].iov_len < sizeof(struct fuse_out_header) ||
	    ((const struct fuse_out_header *)iov[0].iov_base)->unique != io->init_unique)
		return writev(fd, iov, count);

	/* The reply to FUSE_INIT. */
	unsigned char msg[TFS_SESSION_MAX_MSG];
	size_t len = 0;
	for (int i = 0; i < count && len + iov[i].iov_len <= sizeof(msg); i++) {
		memcpy(msg + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (io->reply_len == 0) {
		/* Nobody answered this INIT yet: answer it, and record it. */
		ssize_t n = writev(fd, iov, count);
		if (n >= 0 && len == total && ((struct fuse_out_header *)msg)->error == 0)
			record_reply(io, msg, len);
		init_answered(io, false);
		return n;
	}
	if (io->test_mismatch &&
	    len >= sizeof(struct fuse_out_header) + offsetof(struct fuse_init_out, time_gran))
		((struct fuse_init_out *)(void *)(msg + sizeof(struct fuse_out_header)))
			->max_write ^= 1;
	if (len != io->reply_len ||
	    memcmp(msg + sizeof(struct fuse_out_header), io->reply + sizeof(struct fuse_out_header),
		   len - sizeof(struct fuse_out_header)) != 0) {
		log_mismatch(io, msg, len);
		atomic_store(&io->mismatch, true);
		fuse_session_exit(io->se);
		return (ssize_t)total;
	}
	init_answered(io, true);
	return (ssize_t)total;
}

/* Wait (cancellably) until the replayed INIT has been answered. */
static int wait_init(struct tfs_session_io *io)
{
	while (!atomic_load(&io->init_done)) {
		if (atomic_load(&io->mismatch) || fuse_session_exited(io->se)) {
			errno = EINTR;
			return -1;
		}
		struct timespec ts = { 0, 1000000L };
		nanosleep(&ts, NULL);
	}
	return 0;
}

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	struct tfs_session_io *io = userdata ? tfs_fs_io(userdata) : NULL;
	int old;

	if (io != NULL && io->replay && !atomic_load(&io->init_done)) {
		if (!atomic_exchange(&io->replayed, true)) {
			if (len < io->req_len) {
				errno = EIO;
				return -1;
			}
			memcpy(buf, io->req, io->req_len);
			return (ssize_t)io->req_len;
		}
		if (wait_init(io) != 0)
			return -1;
	}
	ssize_t n = read(fd, buf, len);
	int err = errno;
	/* A request is ours now: nothing below may be a cancellation point. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	if (io != NULL) {
		if (n >= 0)
			DEVICE_READ(io);
		if (n < 0 && err == ENODEV)
			atomic_store(&io->unmounted, true);
		if (n >= (ssize_t)sizeof(struct fuse_in_header) && !atomic_load(&io->recorded) &&
		    ((const struct fuse_in_header *)buf)->opcode == FUSE_INIT &&
		    !atomic_exchange(&io->recorded, true))
			record_request(io, buf, (size_t)n);
	}
	pthread_setcancelstate(old, NULL);
	errno = err;
	return n;
}

int tfs_session_io_attach(struct tfs_session_io *io, struct fuse_session *se, struct tfs_fs *fs)
{
	static const struct fuse_custom_io hooks = {
		.read = hook_read,
		.writev = hook_writev,
	};

	if (tfs_fs_io(fs) != NULL)
		return EBUSY;
	io->se = se;
	tfs_fs_set_io(fs, io);
	int rc = fuse_session_custom_io(se, &hooks, io->fuse_fd);
	if (rc != 0) {
		tfs_fs_set_io(fs, NULL);
		tfs_err(io->log, "libfuse refused the custom I/O: %s", strerror(-rc));
		return -rc;
	}
	return 0;
}

bool tfs_session_io_unmounted(const struct tfs_session_io *io)
{
	return atomic_load(&io->unmounted);
}

bool tfs_session_io_mismatch(const struct tfs_session_io *io)
{
	return atomic_load(&io->mismatch);
}

uint64_t tfs_session_io_serving_ns(const struct tfs_session_io *io)
{
	return atomic_load(&io->serving_ns);
}

bool tfs_session_io_resent(const struct tfs_session_io *io)
{
	return atomic_load(&io->resent);
}
