package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox/docker"
)

func init() {
	register(&command{
		name:    "image prepare",
		summary: "make sure an image is on the Docker daemon; builds " + docker.LocalImage + " locally",
		usage:   "image prepare [--busybox PATH] [--quiet] [IMAGE]",
		help: `Makes sure IMAGE (default ` + docker.LocalImage + `) is on the Docker daemon that DOCKER_HOST
points at. ` + docker.LocalImage + ` is built when missing from a static busybox binary, with no
registry; any other image must be pulled or loaded on the daemon host.`,
		example: `sandboxio image prepare
sandboxio image prepare --busybox ./busybox-static --quiet`,
		exitCodes: `Exit codes:
  0   the image is on the daemon (built now, or already there)
  2   usage or input error: bad flags or arguments
  64  ConfigurationError: the image is missing and is not the local image
  66  CreateTimeout: the daemon did not answer in time
  70  the daemon cannot be reached, or the build failed`,
		setup: func(fs *pflag.FlagSet) runFunc {
			busybox := fs.String("busybox", "", "static busybox `PATH` to build "+docker.LocalImage+" from (default /bin/busybox)")
			quiet := fs.Bool("quiet", false, "no progress line")
			return func(ctx context.Context, e *env, args []string) int {
				if len(args) > 1 {
					fmt.Fprintf(e.stderr, "sandboxio image prepare: want at most one IMAGE, got %d\n", len(args))
					return exitUsage
				}
				img := docker.LocalImage
				if len(args) == 1 {
					img = args[0]
				}
				progress := func(msg string) { fmt.Fprintf(e.stderr, "sandboxio: %s\n", msg) }
				if *quiet {
					progress = nil
				}
				built, err := docker.PrepareImage(ctx, img, *busybox, progress)
				if err != nil {
					fmt.Fprintf(e.stderr, "sandboxio image prepare: %s\n", classLine(err))
					return exitFor(err)
				}
				if built {
					fmt.Fprintf(e.stdout, "%s built\n", img)
				} else {
					fmt.Fprintf(e.stdout, "%s present\n", img)
				}
				return exitOK
			}
		},
	})
}
