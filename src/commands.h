/* commands.h - the subcommands of the tierfs CLI and what they share. */
#ifndef TFS_COMMANDS_H
#define TFS_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include "conf.h"

/* Exit statuses of every subcommand. */
#define TFS_EXIT_OK 0
#define TFS_EXIT_FAIL 1 /* the operation failed; the reason was printed */
/* TFS_EXIT_CONFIG (2, config.h): usage or configuration error */

/* Load the configuration (cmd_config.c): `path` (NULL: the default file,
 * which may be missing), then each "-o" assignment in order, then
 * validate.  Prints "tierfs: <file:line message>" to stderr on error.
 * Returns 0 or TFS_EXIT_CONFIG; on error *cfg is cleared. */
int tfs_cli_load_config(struct tfs_config *cfg, const char *path, char **overrides,
			size_t n_overrides);

/* The options of every command that loads a configuration: -c CONF into
 * *conf, -o SECTION.KEY=VALUE appended to ovr (*n_ovr of them; the caller
 * gives as many slots as arguments) and -v into *verbose.  Returns true
 * when getopt's `c` (with `arg`, its optarg) was one of them.  Cannot
 * fail. */
bool tfs_cli_conf_opt(int c, char *arg, const char **conf, char **ovr, size_t *n_ovr,
		      bool *verbose);

/* `tierfs config [-c CONF] [-o SECTION.KEY=VALUE]...` (argv[0] "config"):
 * print the effective configuration with the origin of every value that
 * is not a default.  Returns TFS_EXIT_OK, TFS_EXIT_CONFIG (usage, invalid
 * configuration) or TFS_EXIT_FAIL (out of memory). */
int tfs_cmd_config(int argc, char **argv);

/* `tierfs mount ...` (cmd_mount.c): argv[0] is the command name; argv0 is
 * the program's argv[0], from which the keeper finds the binary it starts
 * (tfs_keeper_binary_path()). */
int tfs_cmd_mount(int argc, char **argv, const char *argv0);

/* The commands that act on a running daemon through its control socket
 * (cmd_ctl.c); argv[0] is the command name. */
/* `tierfs umount MOUNTPOINT`: ask the daemon to drain (bounded by its
 * writeback.drain_timeout), unmount (umount2 as root, else fusermount3
 * -u), then wait up to 60 s for the daemon to end.  Returns TFS_EXIT_OK,
 * TFS_EXIT_FAIL (the unmount failed) or TFS_EXIT_CONFIG (usage). */
int tfs_cmd_umount(int argc, char **argv);
/* `tierfs flush MOUNTPOINT`: upload everything pending now and wait.
 * Returns TFS_EXIT_OK when nothing is left, TFS_EXIT_FAIL otherwise (or no
 * daemon), TFS_EXIT_CONFIG (usage). */
int tfs_cmd_flush(int argc, char **argv);
/* `tierfs reload MOUNTPOINT`: ask the daemon to read its configuration
 * again and apply what can change without a remount (tierfs.conf(5)
 * RELOAD).  Prints what was applied and what needs a remount.  Returns
 * TFS_EXIT_OK, TFS_EXIT_CONFIG (usage, or the configuration is invalid:
 * the daemon's message with file:line is printed and nothing changed) or
 * TFS_EXIT_FAIL (no daemon, or a new value could not be applied). */
int tfs_cmd_reload(int argc, char **argv);
/* `tierfs upgrade MOUNTPOINT`: ask the daemon to hand over to the binary
 * now on disk (its keeper starts it at once), wait up to 60 s for the new
 * daemon to serve, and print the pause: from the request to the new
 * daemon serving.  Returns TFS_EXIT_OK, TFS_EXIT_FAIL (no daemon, no
 * keeper, or no new daemon in time) or TFS_EXIT_CONFIG (usage). */
int tfs_cmd_upgrade(int argc, char **argv);

/* `tierfs warmup ...` (argv[0] "warmup") and `tierfs pin|unpin PATH...`,
 * `tierfs evict MOUNTPOINT PATH...` (argv[0] the command): drive the
 * daemon's warm-up over its control socket (src/warmup.h).  Return
 * TFS_EXIT_OK, TFS_EXIT_FAIL (a file failed, or no daemon) or
 * TFS_EXIT_CONFIG (usage). */
int tfs_cmd_warmup(int argc, char **argv);
int tfs_cmd_pin(int argc, char **argv);

/* `tierfs near [-c CONF] [-o ...] gc --max-size SIZE [--dry-run]`
 * (cmd_near.c; argv[0] "near"): delete the [near] copies copied longest
 * ago (their LastModified) until the copies take at most SIZE; objects
 * whose key is not a copy's (<16 hex>/<key>) are never deleted.  Returns
 * TFS_EXIT_OK, TFS_EXIT_CONFIG (usage, no [near] bucket) or TFS_EXIT_FAIL
 * (the store failed; what was deleted stays deleted). */
int tfs_cmd_near(int argc, char **argv);

/* `tierfs backend ...`: argv[0] is "backend". */
int tfs_cmd_backend(int argc, char **argv);

/* `tierfs stats [--json] MOUNTPOINT`: argv[0] is "stats".  Asks the daemon
 * serving MOUNTPOINT over its control socket (ctl_client.h) and prints
 * the result.  Returns TFS_EXIT_OK, TFS_EXIT_FAIL (no daemon, daemon error) or
 * TFS_EXIT_CONFIG (usage). */
int tfs_cmd_stats(int argc, char **argv);

#endif
