package objstore

// NoOpenat2 lets the tests run the directory backend's openat walk, the
// path taken where the kernel has no openat2.
var NoOpenat2 = &noOpenat2
