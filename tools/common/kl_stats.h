#pragma once
// The statistics llama-perplexity --kl-divergence prints when a model (Q) is
// compared with a base model position by position, with its definitions:
// means with the standard error sqrt((E[x²] - E[x]²) / (n - 1)), the
// perplexity ratio's uncertainty through the covariance of the two
// negative log-likelihoods, percentiles by linear interpolation between the
// sorted values. Computed from the exact log-probabilities of both models
// (llama-perplexity rounds the base's to 16 bits and clamps those more than
// 16 nats below the top; kiln's --kl-base file keeps float32 logits).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <utility>
#include <vector>

namespace kiln::tools {

class KlStats {
public:
    // One scored position: both models' log-probabilities over the
    // vocabulary, and the token that came next.
    void add(std::span<const double> base_logp, std::span<const double> model_logp, size_t target) {
        const double nll = -model_logp[target], nll_base = -base_logp[target];
        sum_nll_ += nll;
        sum_nll2_ += nll * nll;
        sum_nll_base_ += nll_base;
        sum_nll_base2_ += nll_base * nll_base;
        sum_nll_nll_base_ += nll * nll_base;
        // KL(base || Q) = sum_i p_base(i) (log p_base(i) - log p_Q(i)).
        double kld = 0;
        for (size_t i = 0; i < base_logp.size(); ++i) kld += std::exp(base_logp[i]) * (base_logp[i] - model_logp[i]);
        sum_kld_ += kld;
        sum_kld2_ += kld * kld;
        kld_values_.push_back(kld);
        const auto top = [](std::span<const double> v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
        same_top_ += top(base_logp) == top(model_logp) ? 1 : 0;
        // Δp: how much more probable Q finds the right token than the base does.
        const double p_diff = std::exp(-nll) - std::exp(-nll_base);
        sum_p_diff_ += p_diff;
        sum_p_diff2_ += p_diff * p_diff;
        sum_p_diff4_ += p_diff * p_diff * p_diff * p_diff;
        p_diff_values_.push_back(p_diff);
        ++count_;
    }
    size_t count() const { return count_; }

    void print(std::FILE* out) {
        if (count_ < 2) return;  // no spread to speak of (kiln-perplexity always scores more)
        std::sort(kld_values_.begin(), kld_values_.end());
        std::sort(p_diff_values_.begin(), p_diff_values_.end());
        const auto log_ppl = mean_and_uncertainty(sum_nll_, sum_nll2_);
        const double ppl = std::exp(log_ppl.first), ppl_unc = ppl * log_ppl.second;
        const auto log_ppl_base = mean_and_uncertainty(sum_nll_base_, sum_nll_base2_);
        const double ppl_base = std::exp(log_ppl_base.first), ppl_base_unc = ppl_base * log_ppl_base.second;
        const double cov = covariance();
        const double ratio_log = log_ppl.first - log_ppl_base.first;
        const double ratio_log_unc = std::sqrt(std::max(
            0.0, log_ppl.second * log_ppl.second + log_ppl_base.second * log_ppl_base.second - 2.0 * cov));
        const double ratio = std::exp(ratio_log);
        const double diff_unc = std::sqrt(
            std::max(0.0, ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * ppl * ppl_base * cov));
        fmt::print(out, "====== Perplexity statistics ======\n");
        fmt::print(out, "Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", ppl, ppl_unc);
        fmt::print(out, "Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", ppl_base, ppl_base_unc);
        fmt::print(out, "Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%\n",
                   100.0 * cov / (log_ppl.second * log_ppl_base.second));
        fmt::print(out, "Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", ratio_log, ratio_log_unc);
        fmt::print(out, "Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}\n", ratio, ratio * ratio_log_unc);
        fmt::print(out, "Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}\n\n", ppl - ppl_base, diff_unc);

        fmt::print(out, "====== KL divergence statistics ======\n");
        const auto kld = mean_and_uncertainty(sum_kld_, sum_kld2_);
        fmt::print(out, "Mean    KLD: {:10.6f} ± {:10.6f}\n", kld.first, kld.second);
        fmt::print(out, "Maximum KLD: {:10.6f}\n", kld_values_.back());
        for (const auto& [label, f] : {std::pair{"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95}, {"90.0%", 0.90}})
            fmt::print(out, "{}   KLD: {:10.6f}\n", label, percentile(kld_values_, f));
        fmt::print(out, "Median  KLD: {:10.6f}\n", median(kld_values_));
        for (const auto& [label, f] : {std::pair{"10.0%", 0.10}, {" 5.0%", 0.05}, {" 1.0%", 0.01}, {" 0.1%", 0.001}})
            fmt::print(out, "{}   KLD: {:10.6f}\n", label, percentile(kld_values_, f));
        fmt::print(out, "Minimum KLD: {:10.6f}\n\n", kld_values_.front());

        fmt::print(out, "====== Token probability statistics ======\n");
        const auto p_diff = mean_and_uncertainty(sum_p_diff_, sum_p_diff2_);
        fmt::print(out, "Mean    Δp: {:6.3f} ± {:5.3f} %\n", 100.0 * p_diff.first, 100.0 * p_diff.second);
        fmt::print(out, "Maximum Δp: {:6.3f}%\n", 100.0 * p_diff_values_.back());
        for (const auto& [label, f] : {std::pair{"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95}, {"90.0%", 0.90},
                                       {"75.0%", 0.75}})
            fmt::print(out, "{}   Δp: {:6.3f}%\n", label, 100.0 * percentile(p_diff_values_, f));
        fmt::print(out, "Median  Δp: {:6.3f}%\n", 100.0 * median(p_diff_values_));
        for (const auto& [label, f] : {std::pair{"25.0%", 0.25}, {"10.0%", 0.10}, {" 5.0%", 0.05}, {" 1.0%", 0.01},
                                       {" 0.1%", 0.001}})
            fmt::print(out, "{}   Δp: {:6.3f}%\n", label, 100.0 * percentile(p_diff_values_, f));
        fmt::print(out, "Minimum Δp: {:6.3f}%\n", 100.0 * p_diff_values_.front());
        // RMS Δp's uncertainty from that of the mean square: d sqrt(x) = dx / (2 sqrt(x)).
        const auto p_diff_mse = mean_and_uncertainty(sum_p_diff2_, sum_p_diff4_);
        const double rms = std::sqrt(p_diff_mse.first);
        fmt::print(out, "RMS Δp    : {:6.3f} ± {:5.3f} %\n", 100.0 * rms, rms > 0 ? 100.0 * 0.5 / rms * p_diff_mse.second : 0.0);
        const double same = static_cast<double>(same_top_) / static_cast<double>(count_);
        fmt::print(out, "Same top p: {:6.3f} ± {:5.3f} %\n", 100.0 * same,
                   100.0 * std::sqrt(same * (1.0 - same) / static_cast<double>(count_ - 1)));
    }

private:
    // Mean and its standard error (0 below 11 values, as llama-perplexity does).
    std::pair<double, double> mean_and_uncertainty(double sum, double sum2) const {
        const double n = static_cast<double>(count_);
        const double mean = sum / n;
        const double var = sum2 / n - mean * mean;
        return {mean, var > 0 && count_ > 10 ? std::sqrt(var / (n - 1)) : 0.0};
    }
    // Covariance of the two means (of Q's and the base's negative log-likelihoods).
    double covariance() const {
        if (count_ < 10) return 0.0;
        const double n = static_cast<double>(count_);
        return (sum_nll_nll_base_ / n - (sum_nll_ / n) * (sum_nll_base_ / n)) / (n - 1);
    }
    static double percentile(const std::vector<double>& sorted, double fraction) {
        const double at = fraction * static_cast<double>(sorted.size() - 1);
        const auto below = static_cast<size_t>(at);
        const double t = at - static_cast<double>(below);
        return (1 - t) * sorted[below] + t * sorted[std::min(below + 1, sorted.size() - 1)];
    }
    static double median(const std::vector<double>& sorted) {
        const size_t n = sorted.size();
        return n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
    }

    double sum_nll_ = 0, sum_nll2_ = 0, sum_nll_base_ = 0, sum_nll_base2_ = 0, sum_nll_nll_base_ = 0;
    double sum_kld_ = 0, sum_kld2_ = 0, sum_p_diff_ = 0, sum_p_diff2_ = 0, sum_p_diff4_ = 0;
    size_t same_top_ = 0, count_ = 0;
    std::vector<double> kld_values_, p_diff_values_;
};

}  // namespace kiln::tools
