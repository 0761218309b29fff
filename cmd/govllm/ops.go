package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/govllm/govllm/model/qwen35"
	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/spf13/cobra"
)

func newOpsCmd() *cobra.Command {
	var modelDir, device string
	cmd := &cobra.Command{
		Use:   "ops [--model DIR [--device cpu]]",
		Short: "Print the op × backend coverage matrix, or what a model needs",
		Long: "Without --model, prints every op and dtype with the provider that serves it on each device.\n" +
			"With --model, prints each op the model's paths need and whether the device covers it;\n" +
			"the exit status is 1 when something is missing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, err := backends.Registry()
			if err != nil {
				return err
			}
			if modelDir == "" {
				return printMatrix(cmd.OutOrStdout(), reg)
			}
			dev, ok := backends.ParseDevice(device)
			if !ok {
				return fmt.Errorf("--device %q: unknown device", device)
			}
			_, paths, err := qwen35.Plan(modelDir)
			if err != nil {
				return err
			}
			return printModelCoverage(cmd.OutOrStdout(), reg, dev, paths)
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "checkpoint directory")
	cmd.Flags().StringVar(&device, "device", "cpu", "device to check the model against")
	return cmd
}

func printMatrix(w io.Writer, reg *rt.Registry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "op\tdtype")
	for _, d := range rt.Devices {
		fmt.Fprintf(tw, "\t%s", d)
	}
	fmt.Fprintln(tw)
	for _, op := range rt.Ops() {
		// An op whose kernels all take weights of other dtypes (a fusion
		// of 16-bit matmuls) lists only those.
		hasF32, hasOther := false, false
		for _, d := range rt.Devices {
			for _, dt := range rt.DTypes {
				if _, ok := reg.Selected(op, d, dt); ok {
					hasF32, hasOther = hasF32 || dt == rt.F32, hasOther || dt != rt.F32
				}
			}
		}
		f32Row := hasF32 || !hasOther
		for _, dt := range rt.DTypes {
			cells, any := make([]string, len(rt.Devices)), false
			for i, d := range rt.Devices {
				cells[i] = "-"
				if p, ok := reg.Selected(op, d, dt); ok {
					cells[i], any = p.Name, true
				}
			}
			if !any && (dt != rt.F32 || !f32Row) {
				continue // only list weight dtypes that some backend has
			}
			fmt.Fprintf(tw, "%s\t%s", op, dt)
			for _, c := range cells {
				fmt.Fprintf(tw, "\t%s", c)
			}
			fmt.Fprintln(tw)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Registered is what is compiled in; whether a device runs here is a
	// separate question, answered at the end.
	for _, d := range rt.Devices {
		if err := backends.Usable(d); err != nil {
			fmt.Fprintf(w, "\n%s here: %v\n", d, err)
		}
	}
	return nil
}

func printModelCoverage(w io.Writer, reg *rt.Registry, dev rt.Device, paths []rt.Path) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "path\top\t%s\n", dev)
	for _, p := range paths {
		for _, req := range p.Needs {
			cell := "MISSING"
			if prov, ok := reg.Selected(req.Op, dev, req.DType); ok {
				cell = "ok (" + prov.Name + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, req, cell)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := reg.Check(dev, paths); err != nil {
		var missing *rt.MissingOpsError
		if errors.As(err, &missing) {
			return &exitError{code: 1, err: err}
		}
		return err
	}
	fmt.Fprintf(w, "%s covers every op this model needs\n", dev)
	return nil
}
