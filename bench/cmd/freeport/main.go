// The freeport command: ask the kernel for distinct free loopback ports.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

func main() {
	count := flag.Int("n", 1, "how many distinct ports to print")
	flag.Parse()

	listeners := make([]net.Listener, 0, *count)
	defer func() {
		for _, ln := range listeners {
			ln.Close()
		}
	}()
	for range *count {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "freeport:", err)
			os.Exit(1)
		}
		listeners = append(listeners, ln)
	}
	for _, ln := range listeners {
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	}
}
