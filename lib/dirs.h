/* dirs.h - the directories the daemon creates or reuses (the cache
 * directory ssd.dir, its per-source subdirectory, write-back staging, the
 * control socket's directory), checked so that no other user can have
 * planted them, or can replace them or what they hold.
 *
 * The rule, as OpenSSH's StrictModes applies it to ~/.ssh:
 *   - the directory itself is a directory, not a symlink, owned by the
 *     effective uid (TFS_DIR_ADMIN: or by root), and neither group nor
 *     others may write to it;
 *   - every directory above it, after symlinks are resolved, up to "/",
 *     is owned by root or the effective uid, and neither group nor others
 *     may write to it unless it has the sticky bit (/tmp), where nobody
 *     else can rename or remove what is ours; for a directory reached
 *     through a symlink, both the directories above the symlink and those
 *     above what it resolves to.
 * Directories it creates are mode 0700.
 */
#ifndef TFS_DIRS_H
#define TFS_DIRS_H

#include "log.h"

/* Create `path` and its missing parents (mode 0700) before the check. */
#define TFS_DIR_CREATE 1u
/* A directory the administrator named (ssd.dir): it may be owned by root
 * as well as by the effective uid, and may be reached through a symlink
 * (the checks apply to the directory it resolves to, and its parents). */
#define TFS_DIR_ADMIN 2u
/* After the checks, chmod it to 0700 if group or others may read or
 * search it. */
#define TFS_DIR_PRIVATE 4u

/* Check `path` against the rule above (creating it first with
 * TFS_DIR_CREATE).  Returns 0; ENOTDIR when it, or a directory above it,
 * is not a directory (or, without TFS_DIR_ADMIN, is a symlink); EPERM
 * when an owner or a mode breaks the rule; EINVAL for an empty path or
 * one ending in "." or ".."; ENAMETOOLONG; the errno of mkdir(2),
 * lstat(2), realpath(3) or chmod(2).  A failure is logged to `log` (may
 * be NULL) as one error line naming the directory and what is wrong with
 * it.  Thread safe (no state). */
int tfs_dir_secure(const char *path, unsigned flags, const struct tfs_log *log);

#endif
