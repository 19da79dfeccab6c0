typedef int tfs_stub_cmd_backend;
