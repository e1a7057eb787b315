package inmemory

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// wantsTable tells whether a client (kubectl get) asked for the server-side
// table form of a read.
func wantsTable(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if strings.Contains(part, "as=Table") && strings.Contains(part, "g=meta.k8s.io") {
			return true
		}
	}
	return false
}

// table renders objects as kubectl's columns for Nodes and Pods show them,
// and as name and age for every other kind.
func table(res resource, items []object, rv string) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}}
	t.ResourceVersion = rv
	col := func(name, typ string) metav1.TableColumnDefinition {
		return metav1.TableColumnDefinition{Name: name, Type: typ}
	}
	switch res.name {
	case "nodes":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{col("Name", "string"), col("Status", "string"), col("Roles", "string"), col("Age", "string"), col("Version", "string")}
	case "pods":
		t.ColumnDefinitions = []metav1.TableColumnDefinition{col("Name", "string"), col("Ready", "string"), col("Status", "string"), col("Restarts", "string"), col("Age", "string")}
	default:
		t.ColumnDefinitions = []metav1.TableColumnDefinition{col("Name", "string"), col("Age", "string")}
	}
	for _, o := range items {
		m := metaOf(o)
		name := str(m, "name")
		age := "<unknown>"
		if ts, err := time.Parse(time.RFC3339, str(m, "creationTimestamp")); err == nil {
			age = duration.HumanDuration(time.Since(ts))
		}
		var cells []any
		switch res.name {
		case "nodes":
			cells = []any{name, conditionStatus(o, "Ready", "Ready", "NotReady"), nodeRoles(m), age, fieldValue(o, "status.nodeInfo.kubeletVersion")}
		case "pods":
			ready := "0/1"
			if conditionStatus(o, "Ready", "yes", "no") == "yes" {
				ready = "1/1"
			}
			cells = []any{name, ready, fieldValue(o, "status.phase"), "0", age}
		default:
			cells = []any{name, age}
		}
		partial, _ := json.Marshal(map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": m})
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Raw: partial}})
	}
	return t
}

func conditionStatus(o object, typ, yes, no string) string {
	st, _ := o["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if cm, ok := c.(map[string]any); ok && cm["type"] == typ {
			if cm["status"] == "True" {
				return yes
			}
			return no
		}
	}
	return "Unknown"
}

func nodeRoles(m map[string]any) string {
	labels, _ := m["labels"].(map[string]any)
	var roles []string
	for k := range labels {
		if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && r != "" {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		return "<none>"
	}
	sort.Strings(roles)
	return strings.Join(roles, ",")
}
