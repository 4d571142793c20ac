// Command cnifault-image writes the harness's image (`make image`): an OCI
// image-layout archive of make build's programs (fixtures/image
// HarnessSpec), built without a registry or a container engine, and prints
// its reference and digest. The digest is reproducible: the same binaries
// give the same digest.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cnifault/cnifault/fixtures/image"
)

func main() {
	binDir := flag.String("bin-dir", "_output/bin", "where make build put cnifault and cni-fault")
	out := flag.String("out", "_output/cnifault-image.oci.tar", "the OCI image archive to write")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cnifault-image: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	spec, err := image.HarnessSpec(*binDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cnifault-image: %v\n", err)
		os.Exit(2)
	}
	digest, err := image.Write(spec, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cnifault-image: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("image %s\ndigest %s\narchive %s\n", spec.Ref, digest, *out)
}
