package main

import (
	"fmt"
	"time"

	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/qwen/serve"
	"github.com/urfave/cli/v2"
)

// healthCommand is a container's HEALTHCHECK: distroless and scratch
// images have no curl or wget to ask /health with.
func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "exit 0 if qwenrun serve at --addr answers GET /health with 200 OK, else 1 (for a container's HEALTHCHECK)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "the server's `HOST:PORT`"},
			&cli.DurationFlag{Name: "timeout", Value: 3 * time.Second, Usage: "how long to wait for the answer"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cliutil.Usagef(c, "health: want no arguments, got %d", c.NArg())
			}
			if err := serve.CheckHealth(c.String("addr"), c.Duration("timeout")); err != nil {
				return fmt.Errorf("health: %w", err)
			}
			return nil
		},
	}
}
