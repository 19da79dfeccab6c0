typedef int tfs_stub_source;
