package describe

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// Columns are the table's headings, in clusterctl's v1beta2 order.
var Columns = []string{"NAME", "REPLICAS", "AVAILABLE", "READY", "UP TO DATE", "STATUS", "REASON", "SINCE", "MESSAGE"}

const (
	colName = iota
	colReplicas
	colAvailable
	colReady
	colUpToDate
	colStatus
	colReason
	colSince
	colMessage
	numColumns
)

// ANSI colours of the STATUS column.
const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiGray   = "\x1b[90m"
)

// negative lists the condition types whose True is the unusual state: they
// say something is going on rather than that all is well.
var negative = map[string]bool{
	"Paused": true, "Deleting": true, "RollingOut": true, "ScalingUp": true, "ScalingDown": true,
	"Remediating": true, "Updating": true, "Provisioning": true,
}

type row struct {
	cells [numColumns]string
	color string // of the STATUS cell
}

// Render writes the tree as a table. SINCE is the time from each
// condition's last transition to now, so the same tree and clock always
// give the same text. color adds ANSI colours to the STATUS column.
func Render(w io.Writer, root *Node, now time.Time, color bool) error {
	var rows []row
	var header row
	copy(header.cells[:], Columns)
	rows = append(rows, header)
	rows = appendRows(rows, root, "", "", now)

	var width [numColumns]int
	for _, r := range rows {
		for i, c := range r.cells {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		last := 0
		for i, c := range r.cells {
			if c != "" {
				last = i
			}
		}
		for i := 0; i <= last; i++ {
			c := r.cells[i]
			if i == colStatus && color && r.color != "" && c != "" {
				b.WriteString(r.color + c + ansiReset)
			} else {
				b.WriteString(c)
			}
			if i < last {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// appendRows adds n's rows: prefix is the tree drawing before n's label,
// indent the drawing below n (where its children's connectors start).
func appendRows(rows []row, n *Node, prefix, indent string, now time.Time) []row {
	// under continues the tree's line below n for its message's further
	// lines and its conditions.
	under := indent
	if len(n.Children) > 0 {
		under += "│ "
	}
	r := row{}
	r.cells[colName] = prefix + Label(n)
	if rep := n.Replicas; rep != nil {
		r.cells[colReplicas] = replicasText(rep)
		r.cells[colAvailable] = count(rep.Available)
		r.cells[colReady] = count(rep.Ready)
		r.cells[colUpToDate] = count(rep.UpToDate)
	}
	message := ""
	if n.Role == RoleMachineGroup && n.Status != nil && n.Status.Message == "" {
		message = "See " + strings.Join(n.Machines, ", ")
	}
	rows = append(rows, conditionRows(r, n.Status, message, under, now)...)
	for _, c := range n.Conditions {
		rows = append(rows, conditionRows(row{cells: [numColumns]string{colName: under}}, &c, "", under, now)...)
	}
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			rows = appendRows(rows, c, indent+"└─", indent+"  ", now)
		} else {
			rows = appendRows(rows, c, indent+"├─", indent+"│ ", now)
		}
	}
	return rows
}

// conditionRows fills r's condition cells from c and adds a row for each
// further line of the message; message replaces an empty one.
func conditionRows(r row, c *Condition, message, under string, now time.Time) []row {
	if c == nil {
		return []row{r}
	}
	r.cells[colStatus] = c.Type + ": " + c.Status
	r.cells[colReason] = c.Reason
	if !c.LastTransitionTime.IsZero() {
		r.cells[colSince] = duration.HumanDuration(now.Sub(c.LastTransitionTime))
	}
	r.color = statusColor(c)
	if c.Message != "" {
		message = c.Message
	}
	lines := strings.Split(strings.TrimRight(message, "\n"), "\n")
	r.cells[colMessage] = lines[0]
	out := []row{r}
	for _, l := range lines[1:] {
		var more row
		more.cells[colName] = under
		more.cells[colMessage] = l
		out = append(out, more)
	}
	return out
}

func statusColor(c *Condition) string {
	good, bad := "True", "False"
	if negative[c.Type] {
		good, bad = bad, good
	}
	switch c.Status {
	case good:
		return ansiGreen
	case bad:
		if negative[c.Type] {
			return ansiYellow
		}
		return ansiRed
	default:
		return ansiGray
	}
}

// Label is a node's text in the NAME column.
func Label(n *Node) string {
	switch n.Role {
	case RoleWorkers, RoleOther:
		return n.Role
	case RoleMachineGroup:
		return fmt.Sprintf("%d Machines...", len(n.Machines))
	case RoleClusterInfrastructure, RoleControlPlane, RoleMachineInfrastructure, RoleBootstrapConfig, RoleMachinePoolInfrastructure:
		return n.Role + " - " + n.Kind + "/" + n.Name
	default:
		return n.Kind + "/" + n.Name
	}
}

func replicasText(r *Replicas) string {
	switch {
	case r.Current != nil && r.Desired != nil:
		return fmt.Sprintf("%d/%d", *r.Current, *r.Desired)
	case r.Desired != nil:
		return fmt.Sprintf("0/%d", *r.Desired)
	default:
		return count(r.Current)
	}
}

func count(p *int32) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(int(*p))
}

// JSON writes the tree as indented JSON.
func JSON(w io.Writer, root *Node) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(root)
}

// YAML writes the tree as YAML, with the field names of JSON.
func YAML(w io.Writer, root *Node) error {
	b, err := yaml.Marshal(root)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
