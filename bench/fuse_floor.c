/* bench/fuse_floor.c — the least a FUSE daemon can do for a read-only
 * epoch: what FUSE itself costs per file on this machine, the floor under
 * tierfs in bench/warm.sh's hot epoch (issue 22, part 2).
 *
 * usage: fuse_floor [-t THREADS] SOURCE_DIR MOUNTPOINT
 *
 * A read-only passthrough of SOURCE_DIR, in the foreground, built as
 * tierfs's FUSE loop is (libfuse 3 low level, multithreaded, THREADS
 * workers kept idle, default 16, cloned /dev/fuse descriptors), with
 * everything tierfs does per request left out: a LOOKUP is one openat(2)
 * of an O_PATH descriptor, a GETATTR one fstat(2), an OPEN one openat(2)
 * with FOPEN_KEEP_CACHE and FOPEN_NOFLUSH (as tierfs's read-only opens),
 * a READ one O_DIRECT pread(2) into the reply buffer (as tierfs's SSD
 * hits, less their checksum), a RELEASE one close(2).  Requests of up to
 * 1 MiB (max_read, as tierfs).  Entries and attributes never expire.  No
 * readdir: the epoch reader opens paths from a list.
 * Benchmark scaffolding only: no permission checks beyond the kernel's
 * default, mounted by root for root.  Stops at SIGINT/SIGTERM or unmount.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_READ (1 << 20)

struct node {
	int fd; /* O_PATH */
	uint64_t nlookup;
};

static struct node root_node = { .fd = -1, .nlookup = 1 };

static struct node *node_of(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &root_node : (struct node *)(uintptr_t)ino;
}

static void fl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .attr_timeout = 1e6, .entry_timeout = 1e6 };
	int fd = openat(node_of(parent)->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstatat(fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, err);
		return;
	}
	struct node *n = malloc(sizeof(*n));
	if (n == NULL) {
		close(fd);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n->fd = fd;
	n->nlookup = 1;
	e.ino = (fuse_ino_t)(uintptr_t)n;
	if (fuse_reply_entry(req, &e) != 0) {
		close(fd);
		free(n);
	}
}

static void forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n = node_of(ino);
	if (n == &root_node)
		return;
	/* The kernel sends a node's forgets after its last use: no lock. */
	if ((n->nlookup -= nlookup) == 0) {
		close(n->fd);
		free(n);
	}
}

static void fl_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void fl_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		forget_one(f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void fl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	if (fstatat(node_of(ino)->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, 1e6);
}

static void fl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char proc[64];
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", node_of(ino)->fd);
	int fd = open(proc, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 1;
	fi->noflush = 1;
	if (fuse_reply_open(req, fi) != 0)
		close(fd);
}

static void fl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	/* One buffer per FUSE thread, kept (as tierfs's pooled buffers): a
	 * fresh 1 MiB mapping per request would cost page faults and
	 * zeroing.  O_DIRECT: page-aligned; the kernel asks for whole pages. */
	static _Thread_local void *buf;
	if (size > MAX_READ) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (buf == NULL && posix_memalign(&buf, 4096, MAX_READ) != 0) {
		buf = NULL;
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = pread((int)fi->fh, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void fl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void fl_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_read = MAX_READ;
	conn->max_readahead = MAX_READ;
}

static const struct fuse_lowlevel_ops ops = {
	.init = fl_init,
	.lookup = fl_lookup,
	.forget = fl_forget,
	.forget_multi = fl_forget_multi,
	.getattr = fl_getattr,
	.open = fl_open,
	.read = fl_read,
	.release = fl_release,
};

int main(int argc, char **argv)
{
	long threads = 16;
	int opt;
	while ((opt = getopt(argc, argv, "t:")) != -1) {
		char *end = NULL;
		if (opt == 't') {
			errno = 0;
			threads = strtol(optarg, &end, 10);
		}
		if (opt != 't' || errno || end == optarg || *end || threads < 1 || threads > 256) {
			fprintf(stderr, "usage: fuse_floor [-t THREADS (1-256)] SOURCE_DIR MOUNTPOINT\n");
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: fuse_floor [-t THREADS] SOURCE_DIR MOUNTPOINT\n");
		return 2;
	}
	root_node.fd = open(argv[optind], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_node.fd < 0) {
		perror(argv[optind]);
		return 1;
	}
	char *fargs[] = { argv[0], "-o", "ro,fsname=fuse_floor,max_read=1048576", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargs);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (se == NULL || fuse_set_signal_handlers(se) != 0 ||
	    fuse_session_mount(se, argv[optind + 1]) != 0) {
		fprintf(stderr, "fuse_floor: cannot mount %s\n", argv[optind + 1]);
		return 1;
	}
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, (unsigned)threads);
	fuse_loop_cfg_set_idle_threads(lc, (unsigned)threads);
	int rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return rc ? 1 : 0;
}
