package patch

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Merge is the JSON merge patch (RFC 7386) of doc: a nested map sets the
// fields it names, a nil value removes one. The body is marshalled from
// doc when the patch is sent, so keys and values are always quoted as JSON
// wants, which text formatted by hand does not promise; a value JSON
// cannot carry is the Patch call's error.
func Merge(doc map[string]any) client.Patch { return mergeDoc(doc) }

type mergeDoc map[string]any

func (mergeDoc) Type() types.PatchType { return types.MergePatchType }

func (d mergeDoc) Data(client.Object) ([]byte, error) { return json.Marshal(map[string]any(d)) }
