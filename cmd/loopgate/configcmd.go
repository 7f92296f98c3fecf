// loopgate config: the config API from the command line, in the spirit of
// kubectl and decK, so an operator never hand-writes curl.

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/loopgate/loopgate/engine/confstore"
)

const configUsage = `usage: loopgate config [-admin URL] [-token-env NAME] <command>

commands:
  get [routes|upstreams|versions|routes/ID|upstreams/NAME]
                      print the effective config, or part of it, as JSON
  diff [N]            print what version N (default: the latest) changed
  rollback N          make version N's config the running one, as a new version
  apply -f FILE [-prune]
                      create or replace every route and upstream FILE (YAML
                      or JSON) lists, as one version; -prune also deletes the
                      routes and upstreams it leaves out

The admin token is read from the environment variable -token-env names
(default LOOPGATE_ADMIN_TOKEN), never from the command line.
`

// configCommand runs "loopgate config ..." (args after "config") and
// returns the exit status: 0, 1 when the admin port refused or could not
// be reached, 2 for a command-line mistake.
func configCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loopgate config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "http://127.0.0.1:9901", "the admin port's `URL`")
	tokenEnv := fs.String("token-env", "LOOPGATE_ADMIN_TOKEN", "the environment variable holding the admin token")
	fs.Usage = func() { fmt.Fprint(fs.Output(), configUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	c := &adminClient{base: strings.TrimSuffix(*admin, "/"), token: os.Getenv(*tokenEnv), out: stdout}
	rest := fs.Args()
	mistake := func(msg string) int {
		fmt.Fprintln(stderr, "loopgate config:", msg)
		fs.Usage()
		return 2
	}
	if len(rest) == 0 {
		return mistake("no command")
	}
	var err error
	switch cmd, rest := rest[0], rest[1:]; cmd {
	case "get":
		if len(rest) > 1 {
			return mistake("get takes at most one argument")
		}
		path := "/config"
		if len(rest) == 1 {
			path += "/" + strings.Trim(rest[0], "/")
		}
		err = c.print("GET", path, nil)
	case "diff":
		if len(rest) > 1 {
			return mistake("diff takes at most one version")
		}
		err = c.diff(rest)
	case "rollback":
		if len(rest) != 1 {
			return mistake("rollback takes one version")
		}
		err = c.print("POST", "/config/rollback", []byte(`{"version": `+rest[0]+`}`))
	case "apply":
		af := flag.NewFlagSet("loopgate config apply", flag.ContinueOnError)
		af.SetOutput(stderr)
		file := af.String("f", "", "the YAML or JSON `file` of routes and upstreams")
		prune := af.Bool("prune", false, "delete the routes and upstreams the file leaves out")
		if err := af.Parse(rest); err != nil || *file == "" || af.NArg() > 0 {
			return mistake("apply takes -f FILE [-prune]")
		}
		err = c.apply(*file, *prune)
	default:
		return mistake(fmt.Sprintf("unknown command %q", cmd))
	}
	if err != nil {
		fmt.Fprintln(stderr, "loopgate config:", err)
		return 1
	}
	return 0
}

// adminClient calls the admin port.
type adminClient struct {
	base, token string
	out         io.Writer
}

// do sends one request and returns the body of a 2xx answer, or an error
// with the admin port's message.
func (c *adminClient) do(method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Loopgate-Admin", "1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return nil, fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, e.Message)
		}
		return nil, fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}

// print sends one request and prints the answer, indented.
func (c *adminClient) print(method, path string, body []byte) error {
	data, err := c.do(method, path, body)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if json.Indent(&buf, data, "", "  ") != nil {
		_, err = c.out.Write(data)
		return err
	}
	buf.WriteByte('\n')
	_, err = c.out.Write(buf.Bytes())
	return err
}

// diff prints version n's changes, one resource each: "+ routes users",
// "- upstreams old", "~ routes api" with the fields that changed.
func (c *adminClient) diff(args []string) error {
	n := ""
	if len(args) == 1 {
		n = args[0]
	} else {
		data, err := c.do("GET", "/config/versions", nil)
		if err != nil {
			return err
		}
		var vs struct {
			Latest uint64 `json:"latest"`
		}
		if err := json.Unmarshal(data, &vs); err != nil {
			return err
		}
		n = fmt.Sprint(vs.Latest)
	}
	data, err := c.do("GET", "/config/versions/"+n+"/diff", nil)
	if err != nil {
		return err
	}
	var d struct {
		Changes []struct {
			Kind, ID, Op  string
			Before, After any
		} `json:"changes"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "version %s: %d change(s)\n", n, len(d.Changes))
	for _, ch := range d.Changes {
		mark := map[string]string{"added": "+", "removed": "-", "changed": "~"}[ch.Op]
		fmt.Fprintf(c.out, "%s %s %s\n", mark, ch.Kind, ch.ID)
		before, _ := json.Marshal(ch.Before)
		after, _ := json.Marshal(ch.After)
		if ch.Before != nil {
			fmt.Fprintf(c.out, "    - %s\n", before)
		}
		if ch.After != nil {
			fmt.Fprintf(c.out, "    + %s\n", after)
		}
	}
	return nil
}

// apply sends file's routes and upstreams to POST /config/apply.
func (c *adminClient) apply(file string, prune bool) error {
	text, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc, err := confstore.Parse(text)
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	body := map[string]any{}
	for _, l := range confstore.Lists {
		if v, ok := doc[l.Kind]; ok {
			body[l.Kind] = v
		}
	}
	if len(body) == 0 {
		return fmt.Errorf("%s lists no routes and no upstreams", file)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	path := "/config/apply"
	if prune {
		path += "?prune=1"
	}
	return c.print("POST", path, data)
}
