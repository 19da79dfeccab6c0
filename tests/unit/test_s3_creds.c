/* test_s3_creds.c - the credentials file: profiles, long session tokens
 * (STS tokens exceed libinih's 199-byte lines), permissions, syntax. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "s3_creds.h"

static char path[64];
static struct tfs_log tlog;

static void write_file(const char *text, mode_t mode)
{
	snprintf(path, sizeof(path), "/tmp/tfs-creds-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
	tfs_log_init_stderr(&tlog, TFS_LOG_ERROR);
}

static void fini(void)
{
	unlink(path);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
}

TestSuite(s3_creds, .fini = fini);

Test(s3_creds, long_session_token_and_profiles)
{
	char token[2501];
	memset(token, 'T', 2500);
	token[2500] = '\0';
	char *text = malloc(4000);
	snprintf(text, 4000,
		 "# a comment\n[other]\naws_access_key_id = WRONG\naws_secret_access_key = "
		 "WRONG\n\n"
		 "[train]\n  aws_access_key_id=AKIA1\naws_secret_access_key = s3cr3t \n"
		 "aws_session_token = %s\n",
		 token);
	write_file(text, 0600);
	free(text);
	struct tfs_s3_creds c = { 0 };
	cr_assert_eq(tfs_s3_creds_load(path, "train", &tlog, &c), 0);
	cr_assert_str_eq(c.access_key, "AKIA1");
	cr_assert_str_eq(c.secret_key, "s3cr3t");
	cr_assert_str_eq(c.session_token, token);
	tfs_s3_creds_clear(&c);
}

Test(s3_creds, group_readable_file_is_refused)
{
	write_file("[default]\naws_access_key_id = A\naws_secret_access_key = B\n", 0640);
	struct tfs_s3_creds c = { 0 };
	cr_assert_eq(tfs_s3_creds_load(path, "default", &tlog, &c), EACCES);
	tfs_s3_creds_clear(&c);
}

Test(s3_creds, syntax_error_is_einval)
{
	write_file("[default]\nthis line has no separator\n", 0600);
	struct tfs_s3_creds c = { 0 };
	cr_assert_eq(tfs_s3_creds_load(path, "default", &tlog, &c), EINVAL);
	tfs_s3_creds_clear(&c);
}
