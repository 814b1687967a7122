//! The apply half of the Ready cycle: committed entries into the state
//! machine (writes, membership changes), snapshots installed from the
//! leader, and log compaction. Split from [`super`] (the raft thread's
//! loop), whose private state it works on.

use super::*;

impl Node {
    pub(super) fn apply_entries(
        &mut self,
        app: &mut Applier<'_>,
        entries: Vec<raft::eraftpb::Entry>,
        outcomes: &mut Vec<Outcome>,
        member_outcomes: &mut Vec<(u64, u64, Result<()>)>,
    ) -> Result<()> {
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal if e.data.is_empty() => {}
                // An entry that does not decode is skipped, as a no-op, by
                // every member alike (the decision depends on the entry's
                // bytes only), so one bad entry cannot stop the store on
                // every start. No caller waits for it: its proposer's
                // requests could not be read, and our own proposals always
                // decode.
                EntryType::EntryNormal => match Proposal::decode(e.data.as_ref()) {
                    Ok(p) => {
                        self.last_proposal_ms = self.last_proposal_ms.max(p.time_ms);
                        outcomes.extend(app.apply_proposal(e.index, p)?);
                    }
                    Err(err) => tracing::error!(
                        member = %format!("{:x}", self.id),
                        index = e.index,
                        term = e.term,
                        "skipping committed entry {}: it is not a proposal ({err}); every member skips it",
                        e.index
                    ),
                },
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    let ctx = ConfChangeContext::decode(e.context.as_ref()).unwrap_or_default();
                    let r = if e.get_entry_type() == EntryType::EntryConfChange {
                        ConfChange::parse_from_bytes(&e.data)
                            .map(|cc| self.apply_conf_change(app, &cc, ctx.member.as_ref()))
                    } else {
                        ConfChangeV2::parse_from_bytes(&e.data)
                            .map(|cc| self.apply_conf_change(app, &cc, ctx.member.as_ref()))
                    };
                    let r = r.unwrap_or_else(|err| {
                        tracing::error!(
                            member = %format!("{:x}", self.id),
                            index = e.index,
                            term = e.term,
                            "skipping committed membership change {}: it does not decode ({err}); every member skips it",
                            e.index
                        );
                        Err(Error::Invalid(format!(
                            "the membership change at index {} could not be decoded and was skipped; retry it",
                            e.index
                        )))
                    });
                    member_outcomes.push((ctx.origin, ctx.id, r));
                }
            }
            self.storage.set_applied(&mut app.batch, e.index, e.term)?;
        }
        Ok(())
    }

    pub(super) fn apply_conf_change(
        &mut self,
        app: &mut Applier<'_>,
        cc: &impl raft_proto::ConfChangeI,
        member: Option<&Member>,
    ) -> Result<()> {
        let cs = match self.raw.apply_conf_change(cc) {
            Ok(cs) => cs,
            Err(e) => {
                tracing::warn!("membership change refused by raft: {e}");
                return Err(Error::Invalid(format!("membership change refused: {e}")));
            }
        };
        self.storage.set_conf_state(&mut app.batch, &cs)?;
        let mut members = self
            .shared
            .members
            .write()
            .unwrap_or_else(|e| e.into_inner());
        // Keep the replicated member records in line with the conf state.
        for id in cs.voters.iter().chain(cs.learners.iter()) {
            let learner = cs.learners.contains(id);
            let mut m = members
                .get(id)
                .cloned()
                .or_else(|| member.filter(|m| m.id == *id).cloned())
                .unwrap_or(Member {
                    id: *id,
                    ..Default::default()
                });
            if let Some(given) = member.filter(|m| m.id == *id) {
                m.addr = given.addr.clone();
                m.http = given.http.clone();
            }
            m.learner = learner;
            m.removed = false;
            app.put_member(&m);
            members.insert(*id, m);
        }
        let gone: Vec<u64> = members
            .iter()
            .filter(|(id, m)| !m.removed && !cs.voters.contains(id) && !cs.learners.contains(id))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(m) = members.get_mut(&id) {
                m.removed = true;
                app.put_member(m);
            }
            if id == self.id {
                self.storage.set_removed(&mut app.batch);
                self.removed = true;
            }
        }
        drop(members);
        self.shared.membership.send_modify(|v| *v += 1);
        Ok(())
    }

    pub(super) fn install_snapshot(&mut self, snap: &Snapshot) -> Result<()> {
        let mut b = sled::Batch::default();
        self.storage.apply_snapshot(&mut b, snap)?;
        let index = snap.get_metadata().index;
        self.shared.last_change.fetch_max(index, Ordering::SeqCst);
        self.commit_batch(b, Some(index))?;
        self.shared.sync()?;
        self.storage.reset_log(index, snap.get_metadata().term)?;
        let data: SnapshotData = machine::decode_snapshot(snap.get_data())?;
        {
            let mut members = self
                .shared
                .members
                .write()
                .unwrap_or_else(|e| e.into_inner());
            *members = data.members.into_iter().map(|m| (m.id, m)).collect();
        }
        self.shared.membership.send_modify(|v| *v += 1);
        // Watchers behind the snapshot cannot continue: tell them to relist.
        let _ = self.shared.events.send(Arc::new(RevisionEvents {
            revision: index,
            events: Vec::new(),
        }));
        tracing::info!(member = %format!("{:x}", self.id), "installed snapshot at index {index}");
        Ok(())
    }

    pub(super) fn maybe_compact(&mut self) -> Result<()> {
        let (applied, compacted) = {
            let c = self.storage.cache();
            (c.applied_index, c.compact_index)
        };
        if applied < compacted + self.cfg.snapshot_every {
            return Ok(());
        }
        let to = applied.saturating_sub(self.cfg.keep_entries);
        if to <= compacted {
            return Ok(());
        }
        let mut b = sled::Batch::default();
        if self.storage.compact(&mut b, to)? {
            machine::prune(&self.shared.tree, &mut b, to, self.last_proposal_ms)?;
            self.commit_batch(b, Some(to))?;
            // The compaction record and the applied state it rests on are
            // durable before the entries leave the log.
            self.shared.sync()?;
            self.storage.drop_log_through(to)?;
            tracing::debug!(member = %format!("{:x}", self.id), "compacted the log up to {to}");
        }
        Ok(())
    }
}
