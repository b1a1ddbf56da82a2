// Command etcd is a minimal entry point for the etcd server, built from the
// go.etcd.io/etcd/server/v3 module so the version follows this go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
