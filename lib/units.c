typedef int tfs_stub_units;
