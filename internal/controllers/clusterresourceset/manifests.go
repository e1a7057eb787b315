package clusterresourceset

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// dataHash is the digest of a resource's data recorded in bindings: SHA-256
// over the values in the order of their keys, written sha256:<hex>. It is
// the digest Cluster API records, so bindings written by either compare
// equal for the same data.
func dataHash(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range sortedKeys(data) {
		h.Write(data[k])
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil))
}

func sortedKeys(data map[string][]byte) []string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseData turns every value of a resource's data into objects: the keys in
// order, and within one value Namespaces first, then
// CustomResourceDefinitions, then the rest as written, so that what the
// others need exists before them. The error names the key and the document
// at fault; nothing is returned with it, so that a resource is applied whole
// or not at all.
func parseData(data map[string][]byte) ([]*unstructured.Unstructured, error) {
	var all []*unstructured.Unstructured
	for _, k := range sortedKeys(data) {
		objs, err := parseManifests(data[k])
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
		all = append(all, createOrder(objs)...)
	}
	return all, nil
}

// parseManifests reads one data value: a JSON list of objects, or any number
// of YAML or JSON documents.
func parseManifests(raw []byte) ([]*unstructured.Unstructured, error) {
	var docs []map[string]any
	if trimmed := bytes.TrimSpace(raw); bytes.HasPrefix(trimmed, []byte("[")) {
		if err := json.Unmarshal(trimmed, &docs); err != nil {
			return nil, fmt.Errorf("not a JSON list of objects: %w", err)
		}
	} else {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("document %d is not valid YAML or JSON: %w", len(docs)+1, err)
			}
			docs = append(docs, doc)
		}
	}
	var objs []*unstructured.Unstructured
	for i, doc := range docs {
		if len(doc) == 0 {
			continue // an empty document, as between two "---"
		}
		u := &unstructured.Unstructured{Object: doc}
		var missing []string
		if u.GetAPIVersion() == "" {
			missing = append(missing, "apiVersion")
		}
		if u.GetKind() == "" {
			missing = append(missing, "kind")
		}
		if u.GetName() == "" {
			missing = append(missing, "metadata.name")
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("document %d is not a Kubernetes object: it has no %s", i+1, strings.Join(missing, ", "))
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// createOrder puts Namespaces first and CustomResourceDefinitions second,
// keeping the order of everything else.
func createOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GroupVersionKind().GroupKind().String() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition.apiextensions.k8s.io":
			return 1
		}
		return 2
	}
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return sorted
}
