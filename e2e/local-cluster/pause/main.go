// Command pause holds a pod's namespaces open for the local node (e2e/local-cluster,
// NODE=1): it sleeps until SIGTERM or SIGINT and, being the pod's PID 1 when the pod
// shares its process namespace, reaps every child that exits. Written for this project
// (no registry is reachable, so the usual pause image cannot be pulled).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("vtsnap-pause")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
