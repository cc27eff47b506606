package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/converge-dev/converge/nodeplane/cdi/importer"
)

func init() { subcommands = append(subcommands, newImportCommand) }

// newImportCommand is `converge-node import`: the cdi-importer role (package
// nodeplane/cdi/importer) for one image, printing CDI-style progress lines.
func newImportCommand() *cobra.Command {
	opts := importer.DefaultOptions()
	var src importer.Source
	var target, size, caFile string
	cmd := &cobra.Command{
		Use:   "import --url URL --target PATH/disk.img --size QUANTITY",
		Short: "Import a VM disk image from HTTP(S) into a volume as a sparse raw file (the CDI importer role)",
		Long: `Download --url (raw, qcow2 or any format qemu-img reads), verify --checksum
("sha256:<hex>"), convert it to raw with qemu-img, refuse it if its virtual size
exceeds --size, grow it to --size and rename it over --target. Prints
"progress NN.NN%" lines while it runs and the result at the end. On failure
--target is unchanged, the error names the cause (NotFound, ChecksumMismatch,
NotAnImage, TooBig, Unreachable, Timeout, ...), and the exit status is 1.
Needs qemu-img (Debian qemu-utils).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := resource.ParseQuantity(size)
			if err != nil {
				return fmt.Errorf("--size %q: expected a quantity such as 10Gi: %w", size, err)
			}
			if caFile != "" {
				if src.CA, err = os.ReadFile(caFile); err != nil {
					return fmt.Errorf("--ca-file: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			opts.Progress = func(p importer.Progress) { fmt.Fprintf(out, "progress %s\n", p) }
			res, err := importer.Import(cmd.Context(), src, importer.Target{Path: target, SizeBytes: q.Value()}, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "imported %s (%s, %d bytes downloaded in %d attempt(s), virtual size %d) to %s, %d bytes\n",
				src.URL, res.Format, res.DownloadedBytes, res.Attempts, res.VirtualSize, target, res.SizeBytes)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&src.URL, "url", "", "http:// or https:// URL of the image")
	f.StringVar(&src.Checksum, "checksum", "", `expected checksum of the downloaded bytes, "sha256:<hex>"`)
	f.StringVar(&caFile, "ca-file", "", "PEM file of the CA(s) to trust for https instead of the system roots")
	f.StringVar(&target, "target", "", "absolute path of the disk image file to write (e.g. <volume>/disk.img)")
	f.StringVar(&size, "size", "0", "volume size (a Kubernetes quantity); 0 disables the size check and the resize")
	f.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "time limit of one download attempt")
	f.IntVar(&opts.Retries, "retries", opts.Retries, "retries of a retryable download failure")
	f.BoolVar(&opts.Resize, "resize", opts.Resize, "grow the raw image to --size")
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("target")
	return cmd
}
