module github.com/hepcache/hepcache

go 1.26.8
