typedef int tfs_stub_mini_http;
