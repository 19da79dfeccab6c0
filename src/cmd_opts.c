/* cmd_opts.c - the option parsing the subcommands share: a table of
 * options over getopt_long, --help, and the -c/-o/-v of every command
 * that loads a configuration (commands.h). */
#include "config.h"

#include <getopt.h>
#include <stdlib.h>

#include "commands.h"

/* The options before the command's own: -c, -o, -v (with a conf), -h. */
enum {
	CONF_OPTS = 3,
	MAX_OPTS = 32
};

/* getopt's value for opts[i] without a letter: above every char. */
#define LONG_ONLY(i) (256 + (int)(i))

static int set_opt(const struct tfs_cli_opt *o, char *arg)
{
	if (o->set)
		return o->set(arg, o->dst);
	if (o->has_arg)
		*(const char **)o->dst = arg;
	else
		*(bool *)o->dst = true;
	return 0;
}

static bool conf_opt(int c, char *arg, struct tfs_cli_conf *conf)
{
	if (conf == NULL)
		return false;
	if (c == 'c')
		conf->conf = arg;
	else if (c == 'o')
		conf->ovr[conf->n_ovr++] = arg;
	else if (c == 'v')
		conf->verbose = true;
	else
		return false;
	return true;
}

/* The status of parsing with getopt_long over the options built from
 * `opts` (and `conf`): -1 to go on, else the exit status. */
static int parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
		 const struct tfs_cli_opt *opts, size_t n, struct tfs_cli_conf *conf,
		 void (*usage)(FILE *))
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		if (conf_opt(c, optarg, conf))
			continue;
		if (c == 'h') {
			usage(stdout);
			return TFS_EXIT_OK;
		}
		size_t i = 0;
		while (i < n && c != (opts[i].letter ? opts[i].letter : LONG_ONLY(i)))
			i++;
		if (i == n)
			return tfs_cli_usage_error(NULL, usage);
		int rc = set_opt(&opts[i], optarg);
		if (rc)
			return rc;
	}
	return -1;
}

int tfs_cli_parse(int argc, char **argv, bool in_order, const struct tfs_cli_opt *opts, size_t n,
		  struct tfs_cli_conf *conf, void (*usage)(FILE *), int *first)
{
	static const struct option conf_longopts[CONF_OPTS] = {
		{ "config", required_argument, NULL, 'c' },
		{ "option", required_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
	};
	struct option longopts[CONF_OPTS + 1 + MAX_OPTS + 1] = { { 0 } };
	char shortopts[2 + 5 + 1 + 2 * MAX_OPTS + 1], *s = shortopts;
	size_t nl = 0;

	if (n > MAX_OPTS)
		abort(); /* a command's table, fixed at compile time */
	if (in_order)
		*s++ = '+';
	if (conf) {
		conf->conf = NULL;
		conf->n_ovr = 0;
		conf->verbose = false;
		conf->ovr = calloc((size_t)argc + 1, sizeof(*conf->ovr));
		if (conf->ovr == NULL)
			return TFS_EXIT_FAIL;
		for (; nl < CONF_OPTS; nl++)
			longopts[nl] = conf_longopts[nl];
		for (const char *p = "c:o:v"; *p; p++)
			*s++ = *p;
	}
	longopts[nl++] = (struct option){ "help", no_argument, NULL, 'h' };
	*s++ = 'h';
	for (size_t i = 0; i < n; i++) {
		int val = opts[i].letter ? opts[i].letter : LONG_ONLY(i);
		longopts[nl++] = (struct option){ opts[i].name,
						  opts[i].has_arg ? required_argument : no_argument,
						  NULL, val };
		if (opts[i].letter) {
			*s++ = opts[i].letter;
			if (opts[i].has_arg)
				*s++ = ':';
		}
	}
	*s = '\0';
	int rc = parse(argc, argv, shortopts, longopts, opts, n, conf, usage);
	if (rc != -1)
		tfs_cli_conf_clear(conf);
	*first = optind;
	return rc;
}

void tfs_cli_conf_clear(struct tfs_cli_conf *conf)
{
	if (conf == NULL)
		return;
	free(conf->ovr);
	conf->ovr = NULL;
	conf->n_ovr = 0;
}

int tfs_cli_usage_error(struct tfs_cli_conf *conf, void (*usage)(FILE *))
{
	usage(stderr);
	tfs_cli_conf_clear(conf);
	return TFS_EXIT_CONFIG;
}

int tfs_cli_conf_load(struct tfs_cli_conf *conf, struct tfs_config *cfg)
{
	int rc = tfs_cli_load_config(cfg, conf->conf, conf->ovr, conf->n_ovr);
	tfs_cli_conf_clear(conf);
	return rc;
}
