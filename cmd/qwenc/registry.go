package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/qwenc/qwenc/cmd/internal/pullcache"
	"github.com/qwenc/qwenc/format/oci"
	"github.com/qwenc/qwenc/internal/cliutil"
	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/urfave/cli/v2"
)

// registryFlags are push's and pull's.
func registryFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "insecure", Usage: "allow plain HTTP to a registry that is not localhost"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
	}
}

// registryOptions reads registryFlags. Credentials are docker login's.
func registryOptions(c *cli.Context) oci.Options {
	o := oci.Options{Insecure: c.Bool("insecure")}
	if !c.Bool("quiet") {
		o.Progress = os.Stderr
	}
	return o
}

func pushCommand() *cli.Command {
	return &cli.Command{
		Name: "push",
		Usage: "upload a .qbin file to a container registry as an OCI artifact; prints REGISTRY/REPO@sha256:DIGEST " +
			"(credentials: docker login's config file and credential helpers)",
		ArgsUsage: "FILE REGISTRY/REPO:TAG",
		Flags:     registryFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usagef(c, "push: want two arguments, FILE and REGISTRY/REPO:TAG; got %d", c.NArg())
			}
			res, err := oci.Push(c.Context, c.Args().Get(0), c.Args().Get(1), registryOptions(c))
			if err != nil {
				return err
			}
			// The reference is what a script deploys: lost, the push failed.
			if _, err := fmt.Println(res.Ref); err != nil {
				return fmt.Errorf("writing the reference: %w", err)
			}
			return nil
		},
	}
}

func pullCommand() *cli.Command {
	return &cli.Command{
		Name: "pull",
		Usage: "download a model pushed with qwenc push into the cache ($XDG_CACHE_HOME/qwenc), " +
			"resuming an interrupted pull and checking the digest; prints the file's path",
		ArgsUsage: "REGISTRY/REPO:TAG|REGISTRY/REPO@sha256:DIGEST",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "o", Aliases: []string{"output"}, Usage: "also put the model at `FILE` (a hard link to the cached file where possible)"},
		}, registryFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usagef(c, "pull: want one REGISTRY/REPO:TAG argument, got %d", c.NArg())
			}
			// Before the download, which the refusal would waste.
			if out := c.String("o"); out != "" {
				if err := fsutil.CheckOutput(out); err != nil {
					return fmt.Errorf("-o %s: %w", out, err)
				}
			}
			res, err := pullcache.Pull(c.Context, c.Args().First(), registryOptions(c))
			if err != nil {
				return err
			}
			path := res.Path
			if out := c.String("o"); out != "" {
				if err := oci.Place(res.Path, out); err != nil {
					return fmt.Errorf("-o %s: %w", out, err)
				}
				path = out
			}
			if _, err := fmt.Println(path); err != nil {
				return fmt.Errorf("writing the path: %w", err)
			}
			return nil
		},
	}
}

func cacheCommand() *cli.Command {
	return &cli.Command{
		Name:  "cache",
		Usage: "list the models pulled into the cache ($XDG_CACHE_HOME/qwenc), or remove some",
		Subcommands: []*cli.Command{{
			Name:  "ls",
			Usage: "list the cached models: tags, manifest digest, weight type, file size",
			Action: func(c *cli.Context) error {
				if c.NArg() != 0 {
					return cliutil.Usagef(c, "cache ls: want no arguments, got %d", c.NArg())
				}
				dir, err := pullcache.Dir()
				if err != nil {
					return err
				}
				models, err := oci.Cache{Dir: dir}.List()
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TAGS\tMANIFEST\tTYPE\tSIZE")
				for _, m := range models {
					tags, size := strings.Join(m.Tags, ","), fmt.Sprintf("%.1f MB", float64(m.Size)/1e6)
					if tags == "" {
						tags = "(by digest)"
					}
					if !m.Complete {
						size += " (incomplete)"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", tags, m.Manifest, m.Annotations[oci.AnnotationWeightType], size)
				}
				return w.Flush()
			},
		}, {
			Name:      "rm",
			Usage:     "remove models from the cache, by tag or by digest; a file goes once nothing left names it",
			ArgsUsage: "REGISTRY/REPO:TAG|REGISTRY/REPO@sha256:DIGEST...",
			Action: func(c *cli.Context) error {
				if c.NArg() == 0 {
					return cliutil.Usagef(c, "cache rm: want one REGISTRY/REPO:TAG argument or more")
				}
				dir, err := pullcache.Dir()
				if err != nil {
					return err
				}
				for _, ref := range c.Args().Slice() {
					if err := (oci.Cache{Dir: dir}).Remove(ref); err != nil {
						return err
					}
				}
				return nil
			},
		}},
	}
}
