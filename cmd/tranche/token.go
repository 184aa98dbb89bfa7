package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/tranche/tranche/internal/bootstraptoken"
)

// tokenCmd is `tranche token create|list|delete`, kubeadm's bootstrap token commands.
func tokenCmd() *cobra.Command {
	var kubeconfig string
	client := func() (kubernetes.Interface, error) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig: %w", err)
		}
		return kubernetes.NewForConfig(rc)
	}
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage bootstrap tokens, with which agents join the cluster (as kubeadm token)",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of an administrator (default: $KUBECONFIG, else ~/.kube/config)")
	var ttl time.Duration
	var description string
	var printJoin bool
	create := &cobra.Command{
		Use:   "create [TOKEN]",
		Short: "Create a bootstrap token (Secret kube-system/bootstrap-token-<id>) and print it",
		Long: "Create a bootstrap token valid for authentication and for signing cluster-info, in the group\n" +
			bootstraptoken.DefaultGroup + ", and print it as <id>.<secret>. Without TOKEN a random one is made.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl < 0 {
				return fmt.Errorf("--ttl %v: must not be negative (0 means never expires)", ttl)
			}
			var tok bootstraptoken.Token
			var err error
			if len(args) == 1 {
				tok, err = bootstraptoken.Parse(args[0])
			} else {
				tok, err = bootstraptoken.Generate()
			}
			if err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			secret := bootstraptoken.Secret(tok, bootstraptoken.Options{TTL: ttl, Description: description, Now: time.Now()})
			if _, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(cmd.Context(), secret, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating token %s: %w", tok.ID, err)
			}
			if !printJoin {
				fmt.Fprintln(cmd.OutOrStdout(), tok)
				return nil
			}
			server, hash, err := clusterInfoServerAndHash(cmd.Context(), c)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tranche agent --server %s --token %s --ca-cert-hash %s\n", server, tok, hash)
			return nil
		},
	}
	create.Flags().DurationVar(&ttl, "ttl", bootstraptoken.DefaultTTL, "how long the token is valid; 0 means it never expires")
	create.Flags().StringVar(&description, "description", "", "a human friendly description of the token")
	create.Flags().BoolVar(&printJoin, "print-join-command", false, "print the whole `tranche agent` command to join with the token")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the bootstrap tokens",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			secrets, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("listing tokens: %w", err)
			}
			var infos []bootstraptoken.Info
			for i := range secrets.Items {
				if info, ok := bootstraptoken.FromSecret(&secrets.Items[i]); ok {
					infos = append(infos, info)
				}
			}
			sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
			return printTokens(cmd.OutOrStdout(), infos, time.Now())
		},
	}
	del := &cobra.Command{
		Use:   "delete TOKEN_OR_ID...",
		Short: "Delete bootstrap tokens, given as <id>.<secret> or <id>",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			for _, a := range args {
				id := a
				if strings.Contains(a, ".") {
					tok, err := bootstraptoken.Parse(a)
					if err != nil {
						return err
					}
					id = tok.ID
				}
				if !bootstraputil.IsValidBootstrapTokenID(id) {
					return fmt.Errorf("token id %q is not of the form [a-z0-9]{6}", id)
				}
				name := bootstraputil.BootstrapTokenSecretName(id)
				if err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(cmd.Context(), name, metav1.DeleteOptions{}); err != nil {
					if apierrors.IsNotFound(err) {
						return fmt.Errorf("token %s not found", id)
					}
					return fmt.Errorf("deleting token %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "bootstrap token %q deleted\n", id)
			}
			return nil
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

// printTokens writes kubeadm token list's columns.
func printTokens(out io.Writer, infos []bootstraptoken.Info, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS")
	for _, t := range infos {
		ttl, expires := "<forever>", "<never>"
		if t.Expires != nil {
			expires = t.Expires.UTC().Format(time.RFC3339)
			if d := t.Expires.Sub(now); d > 0 {
				ttl = duration.ShortHumanDuration(d)
			} else {
				ttl = "<invalid>"
			}
		}
		desc := t.Description
		if desc == "" {
			desc = "<none>"
		}
		fmt.Fprintf(w, "%s.<redacted>\t%s\t%s\t%s\t%s\t%s\n", t.ID, ttl, expires, strings.Join(t.Usages, ","), desc, strings.Join(t.Groups, ","))
	}
	return w.Flush()
}

// clusterInfoServerAndHash reads the server URL and the CA's pin from cluster-info.
func clusterInfoServerAndHash(ctx context.Context, c kubernetes.Interface) (string, string, error) {
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("reading kube-public/cluster-info: %w", err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
	if err != nil {
		return "", "", fmt.Errorf("kube-public/cluster-info: %w", err)
	}
	for _, cl := range cfg.Clusters {
		block, _ := pem.Decode(cl.CertificateAuthorityData)
		if block == nil {
			break
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", "", fmt.Errorf("kube-public/cluster-info CA: %w", err)
		}
		return cl.Server, bootstraptoken.CAHash(ca), nil
	}
	return "", "", fmt.Errorf("kube-public/cluster-info has no cluster with a CA")
}
