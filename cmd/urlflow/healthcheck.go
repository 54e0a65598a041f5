package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// healthcheckTimeout bounds the whole check: a urlflow that takes longer to say it is ready
// is not.
const healthcheckTimeout = 3 * time.Second

const healthcheckLong = `Asks the local urlflow serve whether it is ready (GET /readyz: Redis answers and the keys
seal and open) and exits 0 when it answers 200, 1 otherwise with one line saying why. It
is the container image's HEALTHCHECK: the image has no shell and no curl.

The URL is http://127.0.0.1:PORT/readyz with the address serve listens on, read as serve
reads it from --addr or URLFLOW_ADDR (default :8080); an address set only in the
configuration file is not read: give --addr or --url. It waits at most 3 seconds.`

// newHealthcheckCommand returns urlflow healthcheck.
func newHealthcheckCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "exit 0 when the local urlflow serve answers /readyz with 200 (the container's HEALTHCHECK)",
		Long:  healthcheckLong,
		Args:  noArgs,
	}
	addFlags(cmd.Flags(), cmdHealthcheck)
	target := cmd.Flags().String("url", "", "the URL to ask instead (default http://127.0.0.1:PORT/readyz, PORT from --addr)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		u, err := healthcheckURL(cmd, getenv, *target)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), healthcheckTimeout)
		defer cancel()
		return checkReady(ctx, u)
	}
	return cmd
}

// healthcheckURL returns the URL to ask: target when given, else /readyz at the address
// serve listens on, on loopback when that address is every interface.
func healthcheckURL(cmd *cobra.Command, getenv env, target string) (string, error) {
	if target != "" {
		u, err := url.Parse(target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", &usageError{cmd: cmd, err: fmt.Errorf("--url: want an http or https URL such as http://127.0.0.1:8080/readyz, got %q", target)}
		}
		return target, nil
	}
	v, err := commandSettings(cmd, getenv)
	if err != nil {
		return "", err
	}
	addr := v.raw("addr")
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("%s: want the host:port urlflow serve listens on, e.g. :8080, got %q (or give --url)", addrNamed(v), addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// addrNamed is the addr setting as the user gave it: --addr or URLFLOW_ADDR.
func addrNamed(v values) string {
	if v["addr"].From == fromFlag {
		return "--addr"
	}
	return lookupSetting("addr").Env
}

// checkReady asks u and returns nil when it answers 200, else an error of one line that
// says what it answered (its body, short, as /readyz names the check that failed).
func checkReady(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("health check %s: %w", u, err)
	}
	// Never through a proxy: the question is about this machine's urlflow.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		said := strings.Join(strings.Fields(string(body)), " ")
		if said != "" {
			said = ": " + said
		}
		return fmt.Errorf("not ready: %s answered %s%s", u, resp.Status, said)
	}
	return nil
}
