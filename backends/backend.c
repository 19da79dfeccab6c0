typedef int tfs_stub_backend;
