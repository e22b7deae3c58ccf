package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hepcache/hepcache/internal/admin"
	"github.com/hepcache/hepcache/internal/backend"
)

func runPrestage(ctx context.Context, args []string) error {
	fs := newFlagSet("prestage", `Asks the running server to fetch whole files into the cache in the background
([prestage] workers at a time). FILE-LIST ("-": standard input) names one file
per line: a path (/store/data/f.root) for the default origin or a URL
(root://origin.example:1094//store/f.root). Prints the job's ID.`, "hepcache prestage [--cache-dir DIR | --config FILE] [--wait] FILE-LIST|-", "hepcache prestage [--cache-dir DIR | --config FILE] --status [ID]", "hepcache prestage [--cache-dir DIR | --config FILE] --cancel ID")
	dir := fs.String("cache-dir", "", "cache directory of the running server (or use --config)")
	cfgPath := fs.String("config", "", "config file to take cache.dir from (default "+defaultConfigPath+")")
	wait := fs.Bool("wait", false, "wait until every file is staged; exit 1 if any failed")
	status := fs.Bool("status", false, "show the job ID (or list the jobs without ID) instead of submitting")
	cancel := fs.String("cancel", "", "cancel the job with this ID")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, err := cacheDirFrom(*dir, *cfgPath)
	if err != nil {
		return err
	}
	switch {
	case *cancel != "":
		return admin.PrestageCancel(d, *cancel)
	case *status && fs.NArg() == 0:
		js, err := admin.PrestageJobs(d)
		if err != nil {
			return err
		}
		for _, j := range js {
			c := j.Counts
			fmt.Printf("%s %s by %s, %d files: %d done, %d failed, %d cancelled, %d to go\n", j.ID, j.Submitted.UTC().Format(time.RFC3339),
				j.Owner, j.Total, c[backend.StageDone], c[backend.StageFailed], c[backend.StageCancelled], c[backend.StageQueued]+c[backend.StageRunning])
		}
		return nil
	case *status:
		j, err := admin.PrestageStatus(d, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Print(j.Text())
		return nil
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("prestage needs one FILE-LIST (or - for standard input)")
	}
	var list []byte
	if fs.Arg(0) == "-" {
		list, err = io.ReadAll(os.Stdin)
	} else {
		list, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return err
	}
	id, err := admin.Prestage(d, string(list))
	if err != nil {
		return err
	}
	fmt.Println(id)
	if !*wait {
		return nil
	}
	for {
		j, err := admin.PrestageStatus(d, id)
		if err != nil {
			return err
		}
		if j.Finished() {
			fmt.Print(j.Text())
			if n := j.Counts[backend.StageFailed]; n > 0 {
				return fmt.Errorf("%d of %d files failed", n, j.Total)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
