package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func newEvents(g *globals) *cobra.Command {
	var ns string
	var all, follow bool
	cmd := &cobra.Command{
		Use:   "events [SYNC]",
		Short: "Show the Kubernetes Events of a Sync, or of every Sync",
		Long: `events lists the core/v1 Events whose involvedObject is the Sync SYNC (or
any Sync) in -n (default converge-system; -A for every namespace), oldest
first: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE, as "flux events" does.
--watch then prints each new or updated Event as it comes, until
interrupted (exit 0).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if all && len(args) == 1 {
				return fmt.Errorf("events: -A lists the Events of every Sync; name a SYNC with -n instead")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if _, err := getSync(ctx, c, ns, args[0]); err != nil {
					return err
				}
			}
			fields := client.MatchingFields{"involvedObject.kind": v1alpha1.SyncKind}
			if len(args) == 1 {
				fields["involvedObject.name"] = args[0]
			}
			opts := []client.ListOption{fields}
			if !all {
				opts = append(opts, client.InNamespace(ns))
			}
			list := &corev1.EventList{}
			if err := c.List(ctx, list, opts...); err != nil {
				return fmt.Errorf("listing Events: %w", err)
			}
			// Only events of converge.dev Syncs (another group may have a Sync kind).
			list.Items = slices.DeleteFunc(list.Items, func(e corev1.Event) bool { return !isSyncEvent(&e) })
			slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return lastSeen(&a).Compare(lastSeen(&b)) })
			now := time.Now()
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			if all {
				fmt.Fprint(tw, "NAMESPACE\t")
			}
			fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
			for i := range list.Items {
				eventRow(tw, &list.Items[i], all, now)
			}
			tw.Flush()
			if !follow {
				return nil
			}
			w, err := c.Watch(ctx, &corev1.EventList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
			if err != nil {
				return fmt.Errorf("watching Events: %w", err)
			}
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case ev, ok := <-w.ResultChan():
					if !ok {
						return nil
					}
					e, isEvent := ev.Object.(*corev1.Event)
					if !isEvent || (ev.Type != watch.Added && ev.Type != watch.Modified) || !isSyncEvent(e) {
						continue
					}
					eventRow(tw, e, all, time.Now())
					tw.Flush()
				}
			}
		},
	}
	namespaceFlags(cmd, &ns, &all)
	cmd.Flags().BoolVarP(&follow, "watch", "w", false, "after the list, print new and updated Events until interrupted")
	return cmd
}

func isSyncEvent(e *corev1.Event) bool {
	gv := e.InvolvedObject.APIVersion
	return e.InvolvedObject.Kind == v1alpha1.SyncKind && (gv == "" || gv == v1alpha1.GroupVersion.String())
}

// lastSeen is when e last happened: lastTimestamp, else eventTime, else
// firstTimestamp, else its creation (as kubectl's SortableEvents).
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// eventRow writes one row; LAST SEEN is the age as kubectl prints it.
func eventRow(w io.Writer, e *corev1.Event, withNS bool, now time.Time) {
	if withNS {
		fmt.Fprintf(w, "%s\t", e.Namespace)
	}
	age := "<unknown>"
	if t := lastSeen(e); !t.IsZero() {
		age = duration.HumanDuration(now.Sub(t))
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%s\n", age, e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, eventLine(e.Message, maxEventChanges))
}

// maxEventChanges is how many of an event's change lines `converge events`
// prints; `kubectl describe sync` shows them all.
const maxEventChanges = 3

// eventLine prints a converge-controller event message (a head line, then
// one line per changed object) on one line: the head, then at most max
// changes separated by "; ", then "(+N more)".
func eventLine(msg string, max int) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	head, changes := oneLine(lines[0]), lines[1:]
	if len(changes) == 0 {
		return head
	}
	shown := changes
	if len(shown) > max {
		shown = shown[:max]
	}
	for i := range shown {
		shown[i] = oneLine(shown[i])
	}
	out := head + ": " + strings.Join(shown, "; ")
	if n := len(changes) - len(shown); n > 0 {
		out += fmt.Sprintf(" (+%d more)", n)
	}
	return out
}
