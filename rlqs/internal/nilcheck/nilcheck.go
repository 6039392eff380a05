// Package nilcheck tells a nil interface from one holding a nil pointer,
// so that constructors refuse a typed nil (var s *memorystore.Store;
// NewLimiter(s, …)) as they refuse a plain nil, instead of accepting it and
// crashing on the first call.
package nilcheck

import "reflect"

// Nil reports whether v is nil or holds a nil pointer, map, slice, channel
// or function.
func Nil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
