/* session_io.h - the daemon's side of a FUSE session that outlives it:
 * libfuse's custom I/O hooks (fuse_session_custom_io()) on the /dev/fuse
 * descriptor the keeper (keeper.h) holds, which record the FUSE_INIT
 * exchange of the first daemon and replay it in every later one.
 *
 * The record.  The keeper creates one memfd per mount and every daemon
 * inherits it.  The first daemon to read FUSE_INIT from the kernel writes
 * the request into it, then its reply, then seals the memfd against
 * writes (F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL), so no later
 * daemon can change what the kernel negotiated.  Layout: a header
 * (magic "TFSSESS1", request length, reply length), the request at
 * offset 64, the reply at 64 + TFS_SESSION_MAX_MSG.
 *
 * A later daemon (the record holds a request):
 *   - its read hook returns the saved FUSE_INIT first, so libfuse sets up
 *     its session as usual; every other reader waits until that INIT has
 *     been answered (libfuse answers EIO to any request it reads before);
 *   - its writev hook swallows the reply to that INIT (the kernel has had
 *     one) and compares it with the saved reply (the whole struct
 *     fuse_init_out: major, minor, flags, flags2, max_write,
 *     max_readahead, time_gran, max_pages, max_background...); a mismatch
 *     is logged field by field and ends the session
 *     (tfs_session_io_mismatch() turns true);
 *   - then, when the kernel's INIT carried minor >= 40 (Linux 6.9), it
 *     writes a FUSE_NOTIFY_RESEND notification: the kernel moves every
 *     request a dead daemon had read but not answered back to its pending
 *     queue, and this daemon reads them again.
 * When the record holds a request but no reply (the first daemon died
 * before it answered INIT), the saved request is replayed and the reply
 * is recorded and sent to the kernel, as by a first daemon.
 *
 * tierfs has no write_buf operation, so libfuse never splices requests
 * from the device: every read goes through the read hook.
 *
 * Threads: the hooks run on libfuse's worker threads; the state they
 * share is atomic or written before the session starts.  A hook blocked
 * in read() may be cancelled (libfuse cancels its idle workers when the
 * session ends); nothing is lost then, and the hooks do nothing that can
 * be cancelled after a read returned a request.
 */
#ifndef TFS_SESSION_IO_H
#define TFS_SESSION_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* The largest FUSE_INIT request or reply recorded (both are far
 * smaller: 64 and 80 bytes plus a 16-byte header at protocol 7.40). */
#define TFS_SESSION_MAX_MSG 1024

/* Linux 6.9 (protocol 7.40): the notification that makes the kernel
 * resend the requests read but not answered.  /usr/include/linux/fuse.h
 * on the build machines predates it (it stops at 7.38), so the code is
 * defined here, as in the kernel's include/uapi/linux/fuse.h. */
#define TFS_FUSE_NOTIFY_RESEND 7
#define TFS_FUSE_RESEND_MINOR 40

struct fuse_session;

struct tfs_session_io {
	int fuse_fd;        /* the keeper's /dev/fuse descriptor (inherited) */
	int rec_fd;         /* the record memfd (inherited) */
	bool no_resend;     /* test only (TIERFS_TEST_NO_RESEND): never send
			  * FUSE_NOTIFY_RESEND */
	bool test_mismatch; /* test only (TIERFS_TEST_RESUME_MISMATCH): a
			     * replayed INIT's reply is changed (max_write)
			     * before the comparison, as a binary that
			     * negotiates differently would answer */
	const struct tfs_log *log;
	struct fuse_session *se; /* set by tfs_session_io_attach() */
	/* The record as read at start. */
	unsigned char req[TFS_SESSION_MAX_MSG];
	size_t req_len; /* 0: no INIT recorded yet (the first daemon) */
	unsigned char reply[TFS_SESSION_MAX_MSG];
	size_t reply_len;     /* 0: the INIT was never answered */
	uint64_t init_unique; /* the unique of the recorded INIT */
	bool replay;          /* the record held a request: replay it */
	/* State the hooks share. */
	atomic_bool replayed;            /* the saved INIT was handed to libfuse */
	atomic_bool init_done;           /* INIT answered: other readers may read */
	atomic_bool recorded;            /* this daemon recorded (or has) the request */
	atomic_bool unmounted;           /* a read returned ENODEV */
	atomic_bool mismatch;            /* the replayed INIT got another reply */
	atomic_bool resent;              /* FUSE_NOTIFY_RESEND was written */
	atomic_uint_fast64_t serving_ns; /* CLOCK_MONOTONIC when this daemon
					  * began serving (INIT done), or 0 */
};

/* Read the record from `rec_fd` into `io` and set it up for the hooks.
 * `fuse_fd` and `rec_fd` stay the caller's (the session closes fuse_fd
 * when destroyed).  Returns 0, or EIO when the record cannot be read or
 * is malformed (logged). */
int tfs_session_io_open(struct tfs_session_io *io, int fuse_fd, int rec_fd, bool no_resend,
			const struct tfs_log *log);

/* Whether an earlier daemon answered FUSE_INIT on this connection: the
 * kernel may hold node IDs and file handles from before. */
bool tfs_session_io_resumed(const struct tfs_session_io *io);

/* Put the hooks on session `se` with fuse_session_custom_io().  libfuse
 * 3.14 passes its hooks only the session's userdata, which the operations
 * need (`fs`, the struct tfs_fs), so the hooks find `io` through the fs
 * (tfs_fs_set_io()); `se` must have been created with `fs` as its
 * userdata.  Returns 0, EBUSY (the fs has hooks already), or
 * EINVAL/ENOMEM (libfuse's refusal, logged). */
struct tfs_fs;
int tfs_session_io_attach(struct tfs_session_io *io, struct fuse_session *se, struct tfs_fs *fs);

/* Whether the session ended because the filesystem was unmounted (a read
 * returned ENODEV), and whether a replayed INIT was refused. */
bool tfs_session_io_unmounted(const struct tfs_session_io *io);
bool tfs_session_io_mismatch(const struct tfs_session_io *io);

/* CLOCK_MONOTONIC in ns when this daemon began serving requests (its INIT
 * answered or replayed), or 0. */
uint64_t tfs_session_io_serving_ns(const struct tfs_session_io *io);

/* Whether FUSE_NOTIFY_RESEND was sent. */
bool tfs_session_io_resent(const struct tfs_session_io *io);

#endif
