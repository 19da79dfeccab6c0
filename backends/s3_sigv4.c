typedef int tfs_stub_s3_sigv4;
