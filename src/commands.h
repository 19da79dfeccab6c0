/* commands.h - the subcommands of the tierfs CLI and what they share. */
#ifndef TFS_COMMANDS_H
#define TFS_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

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

/* One option of a subcommand, for tfs_cli_parse() (cmd_opts.c). */
struct tfs_cli_opt {
	const char *name; /* --name */
	char letter;      /* also -letter; 0: the long form only */
	bool has_arg;     /* takes a value: --name=V, --name V, -lV, -l V */
	/* Where it goes: without `set`, a flag sets *(bool *)dst to true and a
	 * value is kept in *(const char **)dst (a pointer into argv); with
	 * `set`, set(value or NULL, dst) checks and stores it and returns 0
	 * or an exit status, having printed why. */
	void *dst;
	int (*set)(const char *arg, void *dst);
};

/* What the options of every command that loads a configuration gave:
 * -c/--config CONF, each -o/--option SECTION.KEY=VALUE in order, and
 * -v/--verbose.  `ovr` is owned (tfs_cli_conf_clear()). */
struct tfs_cli_conf {
	const char *conf; /* NULL: the default file */
	char **ovr;
	size_t n_ovr;
	bool verbose;
};

/* Parse the options of argv[1..argc) (argv[0] is the command's name, which
 * getopt's messages show) with getopt_long: the n options of `opts` (at
 * most 32), -h/--help, and with `conf` non-NULL -c, -o and -v into *conf.
 * With `in_order`, options stop at the first operand (getopt's '+'), so
 * that a command's operands may take options of their own; without it,
 * options and operands mix.  Returns -1 when the command goes on, its
 * operands at argv[*first..argc) and *conf to be released
 * (tfs_cli_conf_load() or tfs_cli_conf_clear()); otherwise an exit status,
 * *conf released: TFS_EXIT_OK after usage(stdout) for --help,
 * TFS_EXIT_CONFIG after getopt's message and usage(stderr) for an unknown
 * option or a missing value, an option's set() status, or TFS_EXIT_FAIL
 * (out of memory).  Not thread-safe (getopt). */
int tfs_cli_parse(int argc, char **argv, bool in_order, const struct tfs_cli_opt *opts, size_t n,
		  struct tfs_cli_conf *conf, void (*usage)(FILE *), int *first);
/* Release the overrides tfs_cli_parse() put in *conf (NULL: nothing);
 * conf->conf and conf->verbose stay.  Cannot fail. */
void tfs_cli_conf_clear(struct tfs_cli_conf *conf);
/* For operands the command refuses: usage(stderr), release *conf (NULL:
 * none) and return TFS_EXIT_CONFIG. */
int tfs_cli_usage_error(struct tfs_cli_conf *conf, void (*usage)(FILE *));
/* tfs_cli_load_config() with *conf's file and overrides, then release
 * *conf.  Returns 0 or TFS_EXIT_CONFIG (printed). */
int tfs_cli_conf_load(struct tfs_cli_conf *conf, struct tfs_config *cfg);

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
