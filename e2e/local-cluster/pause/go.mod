// The local node's pod sandbox ("pause") program: our own code, no dependencies.
// build-tools.sh builds it into target/tools/pause; cluster.sh packs it into an image.
module vtsnap/e2e/local-cluster/pause

go 1.26.0
