typedef int tfs_stub_stack;
