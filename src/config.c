typedef int tfs_stub_config;
