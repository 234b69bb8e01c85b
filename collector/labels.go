package collector

import "sync"

// Shape and dtype labels recorded through the C ABI's hot path are ids in
// a process-wide table: C cannot hand Go strings to the ring. Id 0 is "".
var labelTable = struct {
	sync.RWMutex
	ids   map[string]uint32
	names []string
}{ids: map[string]uint32{"": 0}, names: []string{""}}

// maxLabels bounds the table; past it, new labels are recorded as "".
const maxLabels = 1 << 16

// labelID returns the id of s, interning it the first time.
func labelID(s string) uint32 {
	labelTable.RLock()
	id, ok := labelTable.ids[s]
	labelTable.RUnlock()
	if ok {
		return id
	}
	labelTable.Lock()
	defer labelTable.Unlock()
	if id, ok := labelTable.ids[s]; ok {
		return id
	}
	if len(labelTable.names) >= maxLabels {
		return 0
	}
	id = uint32(len(labelTable.names))
	labelTable.names = append(labelTable.names, s)
	labelTable.ids[s] = id
	return id
}

// labelName returns the label of id ("" for an unknown id).
func labelName(id uint32) string {
	if id == 0 {
		return ""
	}
	labelTable.RLock()
	defer labelTable.RUnlock()
	if int(id) < len(labelTable.names) {
		return labelTable.names[id]
	}
	return ""
}
