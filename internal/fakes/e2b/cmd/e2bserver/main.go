// Command e2bserver runs the local E2B conformance server (for the demo and
// for trying the SDK or the CLI against it by hand). Its one template, the
// ID given by -template (default "base"), runs the local busybox template
// image inside the hardened Docker backend. The API key is read from
// E2B_API_KEY, never from a flag; the server prints its URL and serves until
// SIGINT or SIGTERM, then kills every sandbox it holds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	e2bserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/e2b"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	tpl := flag.String("template", "base", "the template ID served")
	busybox := flag.String("busybox", docker.DefaultBusybox, "static busybox the template image is built from")
	urlFile := flag.String("url-file", "", "write the server's URL to this file once it serves")
	flag.Parse()
	if err := run(*addr, *tpl, *busybox, *urlFile); err != nil {
		fmt.Fprintln(os.Stderr, "e2bserver:", err)
		os.Exit(1)
	}
}

func run(addr, tpl, busybox, urlFile string) error {
	key := os.Getenv("E2B_API_KEY")
	if key == "" {
		return fmt.Errorf("set E2B_API_KEY to the key the server accepts")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := e2bserver.EnsureTemplateImage(ctx, busybox); err != nil {
		return err
	}
	d, err := docker.New(docker.WithoutEgressObserver())
	if err != nil {
		return err
	}
	defer d.Close()
	srv, err := e2bserver.StartOn(addr, e2bserver.Config{APIKey: key, Docker: d,
		Templates: map[string]e2bserver.Template{tpl: {Image: e2bserver.TemplateImage, CPUCount: 1, MemoryMB: 512, DiskSizeMB: 1024}}})
	if err != nil {
		return err
	}
	fmt.Println(srv.URL)
	if urlFile != "" {
		if err := os.WriteFile(urlFile, []byte(srv.URL+"\n"), 0o600); err != nil {
			_ = srv.Close()
			return err
		}
	}
	<-ctx.Done()
	return srv.Close()
}
