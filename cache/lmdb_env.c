/* lmdb_env.c - opening the cache's LMDB environment: local-filesystem
 * check, flags, quarantine of a damaged environment, error mapping.
 * See lmdb_env.h for the durability choice (MDB_NOSYNC). */
#include "config.h"

#include "lmdb_env.h"
#include "dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "dbuf.h"

#define PATH_LIMIT 4096
#define QUARANTINE_TRIES 100

static const struct {
	uint32_t magic;
	const char *name;
} network_fs[] = {
	{ 0x6969, "nfs" },       { 0x517B, "smb" },        { 0xFF534D42, "cifs" },
	{ 0xFE534D42, "smb2" },  { 0x65735546, "fuse" },   { 0x00C36400, "ceph" },
	{ 0x01021997, "9p" },    { 0x5346414F, "afs" },    { 0x01161970, "gfs2" },
	{ 0x7461636f, "ocfs2" }, { 0x0BD00BD0, "lustre" },
};

const char *tfs_lmdb_network_fs(unsigned long f_type)
{
	/* f_type is a signed long; magics are 32-bit (CIFS's has the top bit
	 * set, so on 32-bit hosts it arrives sign-extended). */
	uint32_t m = (uint32_t)f_type;
	for (size_t i = 0; i < sizeof(network_fs) / sizeof(network_fs[0]); i++)
		if (network_fs[i].magic == m)
			return network_fs[i].name;
	return NULL;
}

int tfs_lmdb_errno(int rc)
{
	if (rc >= 0)
		return rc;
	switch (rc) {
	case MDB_MAP_FULL:
		return ENOSPC;
	case MDB_NOTFOUND:
		return ENOENT;
	default:
		return EIO;
	}
}

int tfs_lmdb_is_corruption(int rc)
{
	/* MDB_BAD_TXN too: LMDB 0.9 refreshes a named database's record from
	 * the main database on first use in a transaction, ignores a failure
	 * there (a damaged main database) and then answers MDB_BAD_TXN. */
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
	       rc == MDB_VERSION_MISMATCH || rc == MDB_PANIC || rc == MDB_BAD_TXN;
}

int tfs_lmdb_fail(const struct tfs_log *log, int rc, const char *what, ...)
{
	char msg[512];
	va_list ap;

	if (rc == 0)
		return 0;
	va_start(ap, what);
	vsnprintf(msg, sizeof(msg), what, ap);
	va_end(ap);
	tfs_err(log, "%s: %s", msg, mdb_strerror(rc));
	return tfs_lmdb_errno(rc);
}

/* Walk the main database (the list of named databases).  Damage found
 * here would make every mdb_dbi_open() fail, so treat it like a damaged
 * header. */
static int check_main_db(MDB_env *env)
{
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	MDB_dbi dbi;
	MDB_val k, v;
	int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, NULL, 0, &dbi);
	if (rc == 0)
		rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc == 0) {
		while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0)
			;
		if (rc == MDB_NOTFOUND)
			rc = 0;
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	return rc;
}

/* LMDB maps data.mdb and trusts the last page number in its header: a
 * file shorter than that (cut by hand, or by a machine crash under
 * MDB_NOSYNC) kills the process with SIGBUS at the first access past its
 * end.  Call it damaged instead. */
static int check_file_size(MDB_env *env)
{
	MDB_envinfo info;
	MDB_stat st;
	struct stat fst;
	int fd;

	if (mdb_env_info(env, &info) != 0 || mdb_env_stat(env, &st) != 0 ||
	    mdb_env_get_fd(env, &fd) != 0 || fstat(fd, &fst) != 0)
		return 0; /* cannot tell: let LMDB find out */
	if ((uint64_t)fst.st_size < ((uint64_t)info.me_last_pgno + 1) * st.ms_psize)
		return MDB_CORRUPTED;
	return 0;
}

/* Walk every page of every database (a compacting copy into /dev/null).
 * LMDB reports a damaged tree only when a lookup reaches it: the metadata
 * cache or the journal would otherwise fail with EIO at every start
 * instead of being rebuilt. */
static int check_all_dbs(MDB_env *env)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return 0;
	rc = mdb_env_copyfd2(env, fd, MDB_CP_COMPACT);
	close(fd);
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ? rc : 0;
}

/* One attempt.  Returns 0 with *out set, or an LMDB/errno code (nothing
 * logged: the caller decides whether the code means damage). */
static int env_open_once(const char *dir, uint64_t map_size, MDB_env **out)
{
	MDB_env *env = NULL;
	int rc = mdb_env_create(&env);
	int fd;

	if (rc)
		return rc;
	if (map_size > 0)
		rc = mdb_env_set_mapsize(env, (size_t)map_size);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(env, TFS_LMDB_MAXDBS);
	if (rc == 0)
		rc = mdb_env_set_maxreaders(env, TFS_LMDB_MAXREADERS);
	if (rc == 0)
		rc = mdb_env_open(env, dir, MDB_NOTLS | MDB_NOSYNC, 0600);
	if (rc == 0)
		rc = check_file_size(env);
	if (rc == 0)
		rc = check_main_db(env);
	if (rc == 0)
		rc = check_all_dbs(env);
	if (rc) {
		mdb_env_close(env);
		return rc;
	}
	/* An existing file keeps its mode at open; make sure it is private. */
	if (mdb_env_get_fd(env, &fd) == 0)
		(void)fchmod(fd, 0600);
	*out = env;
	return 0;
}

/* LMDB has no page checksums: garbage in a page can make it follow an
 * offset out of the map and die of SIGSEGV/SIGBUS, which would kill the
 * daemon at every start.  So an existing index is first opened and
 * walked in a child process (before any thread exists: this runs during
 * start-up).  Returns 0 (healthy, or nothing to check), MDB_CORRUPTED
 * (the child was killed by a signal or found damage), or an errno of
 * fork. */
static int probe_in_child(const char *dir, uint64_t map_size, int *sig)
{
	char path[PATH_LIMIT];
	struct stat st;
	*sig = 0;
	if (snprintf(path, sizeof(path), "%s/data.mdb", dir) >= (int)sizeof(path) ||
	    stat(path, &st) != 0)
		return 0;
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		MDB_env *env = NULL;
		(void)setrlimit(RLIMIT_CORE, &no_core);
		/* The parent looks for death by a signal.  A sanitizer's handler
		 * (--enable-sanitizers, --enable-tsan) would turn the fault into a
		 * report and exit status 1, and the parent would then open the
		 * damaged index itself and die of the same fault. */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		int rc = env_open_once(dir, map_size, &env);
		if (rc == 0)
			mdb_env_close(env);
		_exit(rc == MDB_CORRUPTED || rc == MDB_INVALID || rc == MDB_PAGE_NOTFOUND ? 2 : 0);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return 0;
	}
	if (WIFSIGNALED(status)) {
		*sig = WTERMSIG(status);
		return MDB_CORRUPTED;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 2 ? MDB_CORRUPTED : 0;
}

/* Move data.mdb and lock.mdb into dir/corrupt-<timestamp>[-N]/.  Returns 0
 * or errno (logged). */
static int quarantine(const char *dir, const struct tfs_log *log, struct tfs_dbuf *qdir)
{
	static const char *const files[] = { "data.mdb", "lock.mdb" };
	char stamp[32];
	struct tm tm;
	time_t now = time(NULL);
	struct tfs_dbuf from, to;
	int rc = 0;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int i = 0; i < QUARANTINE_TRIES; i++) {
		tfs_dbuf_reset(qdir);
		rc = tfs_dbuf_addf(qdir, "%s/corrupt-%s", dir, stamp);
		if (rc == 0 && i > 0)
			rc = tfs_dbuf_addf(qdir, "-%d", i);
		if (rc)
			break;
		if (mkdir(tfs_dbuf_str(qdir), 0700) == 0)
			break;
		rc = errno;
		if (rc != EEXIST)
			break;
	}
	if (rc) {
		tfs_err(log, "lmdb: cannot create '%s' to move a damaged index aside: %s",
			tfs_dbuf_str(qdir), strerror(rc));
		return rc;
	}
	tfs_dbuf_init(&from, PATH_LIMIT);
	tfs_dbuf_init(&to, PATH_LIMIT);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && rc == 0; i++) {
		tfs_dbuf_reset(&from);
		tfs_dbuf_reset(&to);
		rc = tfs_dbuf_addf(&from, "%s/%s", dir, files[i]);
		if (rc == 0)
			rc = tfs_dbuf_addf(&to, "%s/%s", tfs_dbuf_str(qdir), files[i]);
		if (rc == 0 && rename(tfs_dbuf_str(&from), tfs_dbuf_str(&to)) != 0 &&
		    errno != ENOENT) {
			rc = errno;
			tfs_err(log, "lmdb: cannot move '%s' aside: %s", tfs_dbuf_str(&from),
				strerror(rc));
		}
	}
	tfs_dbuf_free(&from);
	tfs_dbuf_free(&to);
	return rc;
}

int tfs_lmdb_open(const char *dir, uint64_t map_size, const struct tfs_log *log, MDB_env **out)
{
	struct statfs sf;
	const char *net;
	int rc;

	*out = NULL;
	/* Created 0700, and refused if another user could have planted it. */
	rc = tfs_dir_secure(dir, TFS_DIR_CREATE, log);
	if (rc)
		return rc == ENOTDIR ? EINVAL : rc;
	if (statfs(dir, &sf) != 0) {
		rc = errno;
		tfs_err(log, "lmdb: statfs '%s': %s", dir, strerror(rc));
		return rc;
	}
	net = tfs_lmdb_network_fs((unsigned long)sf.f_type);
	if (net != NULL) {
		tfs_err(log,
			"lmdb: '%s' is on a %s filesystem (f_type 0x%lx): "
			"LMDB must not live on a network filesystem; use a local disk",
			dir, net, (unsigned long)(uint32_t)sf.f_type);
		return EINVAL;
	}
	if ((uint64_t)(size_t)map_size != map_size) {
		tfs_err(log, "lmdb: map size %llu does not fit the address space",
			(unsigned long long)map_size);
		return EINVAL;
	}

	int sig = 0;
	rc = probe_in_child(dir, map_size, &sig);
	if (rc == MDB_CORRUPTED && sig)
		tfs_warn(log, "lmdb: reading the cache index in '%s' crashed a test process (%s)",
			 dir, strsignal(sig));
	if (rc != MDB_CORRUPTED)
		rc = env_open_once(dir, map_size, out);
	if (rc == MDB_CORRUPTED || rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ||
	    rc == MDB_PAGE_NOTFOUND) {
		struct tfs_dbuf qdir;
		int qrc;

		tfs_dbuf_init(&qdir, PATH_LIMIT);
		qrc = quarantine(dir, log, &qdir);
		if (qrc == 0)
			tfs_warn(log,
				 "lmdb: the cache index in '%s' is damaged (%s): moved it to "
				 "'%s' and starting with an empty cache",
				 dir, mdb_strerror(rc), tfs_dbuf_str(&qdir));
		tfs_dbuf_free(&qdir);
		if (qrc)
			return tfs_lmdb_fail(log, rc, "lmdb: open '%s'", dir);
		rc = env_open_once(dir, map_size, out);
	}
	if (rc)
		return tfs_lmdb_fail(log, rc, "lmdb: open '%s'", dir);

	int dead = 0;
	if (mdb_reader_check(*out, &dead) == 0 && dead > 0)
		tfs_info(log, "lmdb: '%s': cleared %d reader slots of dead processes", dir, dead);
	return 0;
}

void tfs_lmdb_close(MDB_env *env)
{
	if (env)
		mdb_env_close(env);
}
