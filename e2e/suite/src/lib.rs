//! vtsnap's tests against a real Kubernetes API server live in `tests/`; this library is
//! empty. They read the kubeconfig from `VTSNAP_TEST_KUBECONFIG` (`make test-real` starts
//! the local control plane and sets it) and each test works in a namespace of its own.
