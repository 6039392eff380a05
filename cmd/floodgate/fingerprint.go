package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/server"
	"github.com/floodgate/floodgate/httplimit"
)

// newFingerprint turns the identity an operator has (an IP, an API key,
// a partition key) into what the daemon shows and counts under: the
// partition key of a rule, its fingerprint (dashboard, alerts, logs) and
// the path of GET and DELETE /v1/limits.
func newFingerprint() *cobra.Command {
	var file, rule string
	var apiKeyStdin bool
	c := &cobra.Command{
		Use:   "fingerprint [-c FILE] [--rule NAME] [--api-key-stdin] KEY",
		Short: "Print a key's partition key under a rule and its fingerprint, as dashboards, alerts and logs show it",
		Long: `KEY is the partition key, or with --rule the rule's key template filled in:
"203.0.113.5|POST /login" for key "{ip}|{route}". With --api-key-stdin the API key
is read from standard input (out of the shell's history) and KEY writes its
{api_key} part as "-". The fingerprint is keyed by ops.fingerprint_secret, which
the file must set: without it each daemon draws its own at start.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(file)
			if err != nil {
				return err
			}
			var apiKey string
			if apiKeyStdin {
				if apiKey, err = readSecret(cmd.InOrStdin()); err != nil {
					return err
				}
			}
			return fingerprint(cmd.OutOrStdout(), cfg, rule, args[0], apiKey)
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "floodgate.yaml", "configuration file")
	c.Flags().StringVar(&rule, "rule", "", "rule whose key template KEY fills in")
	c.Flags().BoolVar(&apiKeyStdin, "api-key-stdin", false, "read the API key of the {api_key} part from standard input")
	return c
}

func fingerprint(w io.Writer, cfg *config.Config, rule, key, apiKey string) error {
	secret := cfg.Ops.FingerprintSecret
	if secret == "" {
		return errors.New("ops.fingerprint_secret is not set: each daemon keys its fingerprints with a secret drawn at start, which no other process can reproduce")
	}
	if rule != "" {
		var err error
		if key, err = server.PartitionKey(cfg, rule, key, apiKey); err != nil {
			return err
		}
	} else if apiKey != "" {
		return errors.New("--api-key-stdin needs --rule: the API key fills a rule's {api_key} part")
	}
	httplimit.SetFingerprintSecret([]byte(secret))
	path := "/v1/limits/" + url.PathEscape(key)
	if rule != "" {
		path += "?rule=" + url.QueryEscape(rule) + "&form=partition"
	}
	fmt.Fprintf(w, "partition key  %s\nfingerprint    %s\nlimits         %s\n", key, httplimit.Fingerprint(key), path)
	return nil
}

// readSecret reads one line, without its line ending.
func readSecret(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("--api-key-stdin: standard input holds no key")
	}
	return line, nil
}
