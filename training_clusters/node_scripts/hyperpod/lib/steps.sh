# shellcheck shell=bash
#
# The steps both entry points run alike (on_create.sh, the legacy way; on_init_complete.sh, API-driven Slurm),
# so the order that keeps a team user in their lane is written once: the IMDS guard, controller access and
# pam_slurm_adopt are in force before any team account exists on the node (their homes, with authorized_keys,
# may already be on FSx, so a login works the moment the account does); then containers.

# tc_team_steps: imds-guard, controller-access, pam-slurm-adopt, users, enroot-pyxis, docker.
tc_team_steps() {
    if ((${#TC_USERS[@]} > 0)); then
        run_step imds-guard tc_setup_imds_guard
    else
        skip_step imds-guard "no users in training_clusters.json: only administrators log in"
    fi
    if ((${#TC_USERS[@]} == 0)); then
        skip_step controller-access "no users in training_clusters.json: only administrators log in"
    elif [[ $TC_ROLE != controller ]]; then
        skip_step controller-access "runs on the controller only"
    elif [[ $TC_TEAM_LOGINS_ON_CONTROLLER == true ]]; then
        skip_step controller-access "team_logins_on_controller is true: the team logs in here too"
    else
        run_step controller-access tc_keep_team_off_node
    fi

    if [[ $TC_ENABLE_PAM_SLURM_ADOPT != true ]]; then
        skip_step pam-slurm-adopt "enable_pam_slurm_adopt is false"
    elif [[ $TC_ROLE != worker ]]; then
        skip_step pam-slurm-adopt "runs on workers only (the controller sets PrologFlags=Contain)"
    else
        run_step pam-slurm-adopt tc_setup_pam_slurm_adopt
    fi

    if ((${#TC_USERS[@]} > 0)); then
        run_step users tc_setup_users
    else
        skip_step users "no users in training_clusters.json"
    fi

    if [[ $TC_ENABLE_ENROOT_PYXIS == true ]]; then
        run_step enroot-pyxis tc_setup_enroot_pyxis
    else
        skip_step enroot-pyxis "enable_enroot_pyxis is false"
    fi

    if [[ $TC_ENABLE_DOCKER == true ]]; then
        run_step docker tc_setup_docker
    else
        skip_step docker "enable_docker is false"
    fi
}

# tc_closing_steps: observability, then your own steps (training_clusters.json extra_steps), after ours, in
# their order.
tc_closing_steps() {
    local entry name script roles
    if [[ $TC_ENABLE_OBSERVABILITY == true ]]; then
        run_step observability tc_setup_observability
    else
        skip_step observability "enable_observability is false"
    fi

    for entry in "${TC_EXTRA_STEPS[@]}"; do
        IFS=: read -r name script roles <<<"$entry"
        if [[ ,${roles}, == *,"${TC_ROLE}",* ]]; then
            run_step "user-${name}" tc_run_extra_step "$script"
        else
            skip_step "user-${name}" "runs on ${roles//,/, } nodes only"
        fi
    done
}
