package drain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VolumesDetached reports whether every volume has been detached from the
// node, which the Machine controller waits for after draining so that no
// volume is still attached to a machine about to disappear: the node's
// status.volumesAttached is empty and no storage.k8s.io/v1 VolumeAttachment
// names the node. When it is false the string says what is still attached.
// A node that does not exist has nothing attached in its status; its
// VolumeAttachments still count.
//
// VolumeAttachments cannot be listed by node on the server, so this lists
// them all; a cached reader serves that from memory.
func VolumesDetached(ctx context.Context, r client.Reader, nodeName string) (bool, string, error) {
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil && !apierrors.IsNotFound(err) {
		return false, "", fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	var inStatus []string
	for _, v := range node.Status.VolumesAttached {
		inStatus = append(inStatus, string(v.Name))
	}

	attachments := &storagev1.VolumeAttachmentList{}
	if err := r.List(ctx, attachments); err != nil {
		return false, "", fmt.Errorf("listing VolumeAttachments: %w", err)
	}
	var named []string
	for _, va := range attachments.Items {
		if va.Spec.NodeName == nodeName {
			named = append(named, va.Name)
		}
	}

	if len(inStatus) == 0 && len(named) == 0 {
		return true, "", nil
	}
	sort.Strings(inStatus)
	sort.Strings(named)
	var parts []string
	if len(inStatus) > 0 {
		parts = append(parts, fmt.Sprintf("node reports %s attached (%s)", volumes(len(inStatus)), list(inStatus)))
	}
	if len(named) > 0 {
		phrase := "VolumeAttachment %s still names the node"
		if len(named) > 1 {
			phrase = "VolumeAttachments %s still name the node"
		}
		parts = append(parts, fmt.Sprintf(phrase, list(named)))
	}
	return false, fmt.Sprintf("waiting for volumes to detach from node %s: %s", nodeName, strings.Join(parts, "; ")), nil
}

func volumes(n int) string {
	if n == 1 {
		return "1 volume"
	}
	return fmt.Sprintf("%d volumes", n)
}
