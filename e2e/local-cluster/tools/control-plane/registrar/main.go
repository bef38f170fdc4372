// The local node's CSI plugin registrar: the part of kubernetes-csi's node-driver-registrar
// that kubelet needs, written here because that module is not served by the module proxy
// this project builds from. It serves kubelet's plugin registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on a socket in kubelet's
// plugins_registry directory, naming the driver and its CSI socket; kubelet then calls the
// driver's Node service itself.
//
// A registrar in Go rather than in the Rust driver: kubelet's registration client sends the
// socket path as the HTTP/2 :authority, which the Rust gRPC stack (h2) rejects as malformed
// (PROTOCOL_ERROR), while kubelet's CSI client sends "localhost", which it accepts.
//
// Usage: registrar --driver-name NAME --csi-endpoint /abs/csi.sock --registration-dir DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	driver   string
	endpoint string
	refused  chan string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	log.Printf("kubelet asked for the plugin info of %s", r.driver)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driver,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("kubelet registered %s", r.driver)
	} else {
		log.Printf("kubelet refused %s: %s", r.driver, s.Error)
		select {
		case r.refused <- s.Error:
		default:
		}
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func main() {
	driver := flag.String("driver-name", "", "the CSI driver's name (GetPluginInfo)")
	endpoint := flag.String("csi-endpoint", "", "the driver's CSI socket (an absolute path)")
	dir := flag.String("registration-dir", "", "kubelet's plugins_registry directory")
	flag.Parse()
	if *driver == "" || !filepath.IsAbs(*endpoint) || !filepath.IsAbs(*dir) {
		fmt.Fprintln(os.Stderr, "usage: registrar --driver-name NAME --csi-endpoint /abs/csi.sock --registration-dir /abs/dir")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o750); err != nil {
		log.Fatalf("registration directory: %v", err)
	}
	// node-driver-registrar's naming: kubelet watches the directory for <driver>-reg.sock
	socket := filepath.Join(*dir, *driver+"-reg.sock")
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatalf("stale socket %s: %v", socket, err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listen %s: %v", socket, err)
	}
	r := &registrar{driver: *driver, endpoint: *endpoint, refused: make(chan string, 1)}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if err := srv.Serve(lis); err != nil {
			log.Fatalf("serve %s: %v", socket, err)
		}
	}()
	log.Printf("registering %s (CSI socket %s) at %s", *driver, *endpoint, socket)
	code := 0
	select {
	case <-stop:
	case <-r.refused:
		code = 1
	}
	// the socket goes first: kubelet deregisters the driver when it disappears
	srv.Stop()
	_ = os.Remove(socket)
	os.Exit(code)
}
