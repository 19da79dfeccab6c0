typedef int tfs_stub_local;
