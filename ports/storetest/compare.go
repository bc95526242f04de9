package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

var timeType = reflect.TypeOf(time.Time{})

// normalize returns a copy of v in which times are in UTC and empty
// slices and maps are nil, differences a store may introduce without changing
// what a value means.
func normalize(v reflect.Value) reflect.Value {
	switch {
	case v.Type() == timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return reflect.ValueOf(time.Time{})
		}
		return reflect.ValueOf(time.Unix(0, t.UnixNano()).UTC())
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		return v
	case v.Kind() == reflect.Map:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		return v
	case v.Kind() == reflect.Slice:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(normalize(v.Index(i)))
		}
		return out
	case v.Kind() == reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		for i := 0; i < v.NumField(); i++ {
			if out.Field(i).CanSet() {
				out.Field(i).Set(normalize(v.Field(i)))
			}
		}
		return out
	}
	return v
}

// equal reports whether got and want hold the same values after normalize.
func equal(got, want any) bool {
	return reflect.DeepEqual(normalize(reflect.ValueOf(got)).Interface(), normalize(reflect.ValueOf(want)).Interface())
}

// expect fails the test when got and want differ.
func expect(t testing.TB, what string, got, want any) {
	t.Helper()
	if !equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

func show(v any) string { return fmt.Sprintf("%+v", v) }
